#pragma once

#include "http/message.h"

namespace fencepost::proxy {

using Request = fencepost::http::Request;
using Response = fencepost::http::Response;

}  // namespace fencepost::proxy
