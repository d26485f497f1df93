#pragma once

#include <string>

namespace fencepost::testing {

// A metric sample's value from a /metrics text body; -1 when absent.
double MetricValue(const std::string& exposition, const std::string& series);

}  // namespace fencepost::testing
