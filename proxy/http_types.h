#pragma once

#include "storage/backend.h"

namespace fencepost::proxy {

using Request = storage::HttpRequest;
using Response = storage::HttpResponse;

}  // namespace fencepost::proxy
