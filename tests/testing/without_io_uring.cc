// without_io_uring PROGRAM [ARGS...]: runs PROGRAM where io_uring is
// forbidden, as Docker's default seccomp profile forbids it: a seccomp
// filter makes io_uring_setup, io_uring_enter and io_uring_register fail
// with EPERM, for PROGRAM and every process it starts. Tests use it to run
// the server as it runs in such a container.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: without_io_uring PROGRAM [ARGS...]\n");
    return 2;
  }
#if defined(__x86_64__)
  constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#else
#error "without_io_uring knows x86-64 and AArch64 only"
#endif
  // x32's system calls are x86-64's with this bit set.
  constexpr unsigned kX32 = 0x40000000;
  constexpr unsigned kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  sock_filter filter[] = {
      // Another architecture's system calls have other numbers: refuse
      // them all rather than misread them.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, kX32, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, kDeny),
  };
  sock_fprog program{
      static_cast<unsigned short>(sizeof filter / sizeof *filter), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "without_io_uring: cannot install the filter: %s\n",
                 std::strerror(errno));
    return 2;
  }
  execvp(argv[1], argv + 1);
  std::fprintf(stderr, "without_io_uring: cannot run %s: %s\n", argv[1],
               std::strerror(errno));
  return 127;
}
