#pragma once
// Ids the server gives requests whose client named none: 128 random bits (the operating
// system's generator) as 32 hex digits, like sglang's uuid4 hex. Unguessable, so one client
// cannot /abort_request another's request by counting.
#include <string>

namespace aerie::launch {

std::string random_request_id();

}  // namespace aerie::launch
