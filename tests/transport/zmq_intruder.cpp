// A process on the same host that is not part of the launch and tries what an attacker
// would against rank 0's ZeroMQ endpoints (tests/launch/zmq_intrusion_test.py drives it):
// for each endpoint it connects a PULL socket (to take batches meant for a worker) and a
// PUSH socket that sends forged results, a forged heartbeat and garbage — once in plain
// ZeroMQ and once with CURVE keys of its own. It prints one JSON line: how many frames it
// received (must be 0) and how many it managed to queue for sending.
//   zmq_intruder SECONDS ENDPOINT...
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "transport/codec.hpp"
#include "transport/curve.hpp"

using namespace aerie::transport;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: zmq_intruder SECONDS ENDPOINT...\n");
    return 2;
  }
  const double seconds = std::stod(argv[1]);
  zmq::context_t ctx;
  struct Probe {
    zmq::socket_t pull, push;
  };
  std::vector<Probe> probes;
  const CurveKeyPair mine = CurveKeyPair::generate(), fake_server = CurveKeyPair::generate();
  for (int i = 2; i < argc; ++i) {
    for (bool curve : {false, true}) {
      Probe p{zmq::socket_t(ctx, zmq::socket_type::pull), zmq::socket_t(ctx, zmq::socket_type::push)};
      for (auto* s : {&p.pull, &p.push}) {
        s->set(zmq::sockopt::linger, 0);
        if (curve) {
          s->set(zmq::sockopt::curve_serverkey, fake_server.public_key);
          s->set(zmq::sockopt::curve_publickey, mine.public_key);
          s->set(zmq::sockopt::curve_secretkey, mine.secret_key);
        }
        s->connect(argv[i]);
      }
      probes.push_back(std::move(p));
    }
  }
  BatchResult forged;
  forged.step_id = 1;
  forged.rids = {0};
  forged.next_tokens = {1};
  const std::vector<uint8_t> frames[] = {encode_message(forged), encode_message(Heartbeat{.seq = 0, .rank = 1}),
                                         std::vector<uint8_t>(64, 0xAB)};
  uint64_t received = 0, sent = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (auto& p : probes) {
      for (const auto& f : frames)
        if (p.push.send(zmq::buffer(f), zmq::send_flags::dontwait)) ++sent;
      zmq::message_t m;
      while (p.pull.recv(m, zmq::recv_flags::dontwait)) ++received;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("{\"endpoints\": %d, \"received\": %llu, \"queued\": %llu}\n", argc - 2, static_cast<unsigned long long>(received),
              static_cast<unsigned long long>(sent));
  return 0;
}
