// fencepost: a fencing-token guard in front of a key-value or file store.

#include "proxy/entry.h"

int main(int argc, char** argv) {
  return fencepost::proxy::Main(argc, argv, fencepost::proxy::TestSwitches{});
}
