#pragma once

#include "http/body_source.h"
#include "http/json.h"
#include "http/message.h"

namespace fencepost::proxy {

using Request = fencepost::http::Request;
using Response = fencepost::http::Response;

using fencepost::http::AppendJsonString;
using fencepost::http::BodySource;
using fencepost::http::DecodeBase64;
using fencepost::http::FormatRfc3339;
using fencepost::http::JsonLimits;
using fencepost::http::JsonMember;
using fencepost::http::JsonScalar;
using fencepost::http::JsonShape;
using fencepost::http::JsonValue;
using fencepost::http::ParseFlatObject;
using fencepost::http::ParseJson;

}  // namespace fencepost::proxy
