#pragma once

#include "s3/location.h"

// The locations s3/'s unit tests address: a local RGW's bucket, and one on
// AWS's endpoint.
namespace fencepost::s3::testing {

// The bucket "fencepost" at http://127.0.0.1:7480.
inline Location Rgw(Addressing addressing) {
  Location location;
  location.endpoint = ParseEndpoint("http://127.0.0.1:7480");
  location.bucket = "fencepost";
  location.addressing = addressing;
  return location;
}

// The bucket "fencepost" at https://s3.us-east-1.amazonaws.com, virtual.
inline Location Aws() {
  Location location = Rgw(Addressing::kVirtual);
  location.endpoint = ParseEndpoint("https://s3.us-east-1.amazonaws.com");
  return location;
}

}  // namespace fencepost::s3::testing
