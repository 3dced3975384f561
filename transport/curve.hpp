#pragma once
// CurveZMQ keys for the channels between ranks (DESIGN §5: peers authenticate, so nothing
// outside the launch can read or forge frames). Rank 0 makes a key pair per bound socket and
// one per connecting peer at start and hands them out over MPI only; a socket without the
// server's public key cannot complete the handshake, so it neither receives batches nor
// delivers results, and loopback traffic is encrypted.
#include <string>

namespace aerie::transport {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;
  // Fresh random keys; throws aerie::Error when libzmq was built without CURVE.
  static CurveKeyPair generate();
};

// How one end of a channel authenticates: the binding end is the CURVE server (its own pair);
// the connecting end is a client that must know the server's public key.
struct ChannelAuth {
  CurveKeyPair own;
  std::string server_public_key;  // connecting end only
};

bool curve_available();

}  // namespace aerie::transport
