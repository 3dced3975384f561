#include "transport/curve.hpp"

#include <zmq.h>

#include "kernels/error.hpp"

namespace aerie::transport {

bool curve_available() { return zmq_has("curve") != 0; }

CurveKeyPair CurveKeyPair::generate() {
  AERIE_CHECK(curve_available(), "this libzmq has no CURVE security (built without libsodium): the rank channels cannot authenticate");
  char pub[41] = {}, sec[41] = {};
  AERIE_CHECK(zmq_curve_keypair(pub, sec) == 0, "zmq_curve_keypair failed: " << zmq_strerror(zmq_errno()));
  return {pub, sec};
}

}  // namespace aerie::transport
