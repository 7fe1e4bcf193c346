// The other process of a two-process integration test: this test binary re-executed with one
// environment variable set, which makes it play its part before gtest's main runs. It starts
// on this node (fork + exec, a pipe back), or, with ARPMA_TEST_PEER_AGENT=host:port, on
// another node through test/support/peer_agent.cpp (test/vm/two-nodes-suite.sh runs one
// there), so that the peer's death is another kernel's, seen over a real link.
//
// The child finds the descriptor it writes to as the last field of its variable
// ("spec:fd"); what it writes comes out of read(). Killed and reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace arpma::test {

/// ARPMA_TEST_PEER_AGENT ("host:port" of a peer_agent on another node), or empty.
inline std::string peer_agent() {
  const char* env = std::getenv("ARPMA_TEST_PEER_AGENT");  // NOLINT(concurrency-mt-unsafe)
  return env != nullptr ? env : "";
}

/// Runs `path` with `assignment` ("NAME=value") added to this process's environment and
/// `keep_fd` (when >= 0) inherited: fork, then exec at once, so that the child starts
/// single-threaded with a provider of its own (nothing but async-signal-safe calls between
/// fork and exec). Its stdout goes nowhere. The child's pid, or -1.
inline pid_t spawn_with(const char* path, std::string assignment, int keep_fd) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(assignment.data());
  env.push_back(nullptr);
  std::string argv0 = "peer_process";
  std::array<char*, 2> argv = {argv0.data(), nullptr};
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (keep_fd >= 0) (void)::fcntl(keep_fd, F_SETFD, 0);
    if (devnull >= 0) (void)::dup2(devnull, STDOUT_FILENO);
    ::execve(path, argv.data(), env.data());
    ::_exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  return pid;
}

class peer_process {
 public:
  /// Starts this binary with `var`=`spec`:fd; started() says whether that worked.
  peer_process(const std::string& var, const std::string& spec) {
    const auto agent = peer_agent();
    if (agent.empty())
      start_here(var, spec);
    else
      start_there(agent, var, spec);
  }
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;
  ~peer_process() { finish(); }

  [[nodiscard]] bool started() const { return fd_ >= 0 && (remote_ || pid_ > 0); }
  /// Whether the child has written something not read yet (or is gone), now.
  [[nodiscard]] bool ready() const {
    pollfd p{fd_, POLLIN, 0};
    return !said_.empty() || (fd_ >= 0 && ::poll(&p, 1, 0) == 1);
  }

  /// The next `n` bytes the child wrote, waiting at most `limit` for each; fewer when it
  /// ended or went quiet.
  std::string read(std::size_t n, std::chrono::milliseconds limit) {
    while (said_.size() < n) {
      if (!remote_) {
        const auto c = next_byte(limit);
        if (c < 0) break;
        said_.push_back(static_cast<char>(c));
      } else if (next_frame(limit) != 'd') {
        break;
      }
    }
    const auto out = said_.substr(0, n);
    said_.erase(0, out.size());
    return out;
  }

  /// What the child is doing now, for a failure message: per thread, its state, the kernel
  /// function it sleeps in, its system call (number and arguments, /proc/PID/syscall) and,
  /// where this process may read it (root, as in the guests), its kernel stack. A child that
  /// went quiet is then seen where it waits. Empty for a child on another node.
  [[nodiscard]] std::string where() const {
    if (remote_ || pid_ <= 0) return {};
    const auto slurp = [](const std::filesystem::path& f) {
      std::ifstream in(f);
      std::ostringstream out;
      out << in.rdbuf();
      auto text = out.str();
      while (!text.empty() && text.back() == '\n') text.pop_back();
      return text;
    };
    std::ostringstream out;
    std::error_code ec;
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid_) + "/task";
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      const auto stat = slurp(t.path() / "stat");
      const auto state = stat.rfind(')');
      out << "thread " << t.path().filename().string() << ": state "
          << (state != std::string::npos ? stat.substr(state + 2, 1) : "?") << ", wchan "
          << slurp(t.path() / "wchan") << ", syscall " << slurp(t.path() / "syscall") << "\n";
      const auto stack = slurp(t.path() / "stack");
      if (!stack.empty()) out << stack << "\n";
    }
    out << user_stacks();
    return out.str();
  }

  /// The child's threads' user stacks, by gdb where there is one (bounded: 60 s).
  [[nodiscard]] std::string user_stacks() const {
    if (::access("/usr/bin/gdb", X_OK) != 0) return {};
    const auto cmd = "timeout 60 /usr/bin/gdb -q -batch -p " + std::to_string(pid_) +
                     " -ex 'thread apply all bt' 2>&1 </dev/null";
    FILE* gdb = ::popen(cmd.c_str(), "r");  // NOLINT(cert-env33-c): a diagnostic, fixed text
    if (gdb == nullptr) return {};
    std::string text;
    std::array<char, 4096> chunk{};
    for (std::size_t n = 0; (n = std::fread(chunk.data(), 1, chunk.size(), gdb)) > 0;)
      text.append(chunk.data(), n);
    (void)::pclose(gdb);
    return text;
  }

  /// SIGSTOP, and back once every thread of the child has stopped: the signal alone takes
  /// effect later, and a child still running for a moment could answer what the caller sends
  /// next (seen once in CI).
  void stop() {
    if (remote_) {
      if (fd_ >= 0 && send_command('S')) (void)until_frame('s');
      return;
    }
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);
    int st = 0;
    (void)::waitpid(pid_, &st, WUNTRACED);
  }

  /// SIGKILL and reap: once this returns, the kernel has closed everything the child had.
  /// Its status: 128 + signal, or the exit status (-1 when it could not be learnt).
  int kill() {
    if (remote_) {
      if (fd_ >= 0 && send_command('K')) (void)until_frame('k');  // the frame sets status_
      close_fd();
      return status_;
    }
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGKILL);
    int st = 0;
    (void)::waitpid(pid_, &st, 0);
    pid_ = -1;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }

  /// Kills and reaps the child, closes the channel: nothing of it is left here.
  void finish() {
    kill();
    close_fd();
  }

 private:
  void start_here(const std::string& var, const std::string& spec) {
    std::array<int, 2> fds{};
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) return;
    fd_ = fds[0];
    pid_ = spawn_with("/proc/self/exe", var + "=" + spec + ":" + std::to_string(fds[1]), fds[1]);
    ::close(fds[1]);
  }

  // The agent runs the same path: the nodes share the build's directory at the same place.
  void start_there(const std::string& agent, const std::string& var, const std::string& spec) {
    remote_ = true;
    const auto colon = agent.rfind(':');
    if (colon == std::string::npos) return;
    fd_ = connect_to(agent.substr(0, colon), agent.substr(colon + 1));
    if (fd_ < 0) return;
    std::array<char, PATH_MAX> self{};
    const auto len = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
    const std::string request =
        "exec " + std::string(self.data(), len > 0 ? len : 0) + "\nenv " + var + "=" + spec + "\n";
    if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size()))
      close_fd();
  }

  static int connect_to(const std::string& host, const std::string& port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
    int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(found);
    return fd;
  }

  bool send_command(char c) { return ::send(fd_, &c, 1, MSG_NOSIGNAL) == 1; }

  /// One byte from the channel, or -1 on its end or after `limit` without one.
  [[nodiscard]] int next_byte(std::chrono::milliseconds limit) const {
    pollfd p{fd_, POLLIN, 0};
    unsigned char c = 0;
    if (fd_ < 0 || ::poll(&p, 1, static_cast<int>(limit.count())) != 1) return -1;
    return ::read(fd_, &c, 1) == 1 ? c : -1;
  }

  /// The agent's next frame: 'd' (one byte the child wrote, kept), 's' (stopped), 'k' (killed,
  /// two bytes of status); 0 on the channel's end or silence.
  char next_frame(std::chrono::milliseconds limit) {
    const int tag = next_byte(limit);
    if (tag == 'd' || tag == 'k') {
      const int a = next_byte(limit);
      if (a < 0) return 0;
      if (tag == 'd') {
        said_.push_back(static_cast<char>(a));
        return 'd';
      }
      const int b = next_byte(limit);
      if (b < 0) return 0;
      status_ = (a << 8) | b;
      return 'k';
    }
    return tag == 's' ? 's' : 0;
  }

  /// Reads frames (keeping what the child said) until `tag`; whether it came within 10 s.
  bool until_frame(char tag) {
    for (;;) {
      const char got = next_frame(std::chrono::seconds(10));
      if (got == tag) return true;
      if (got != 'd') return false;
    }
  }

  void close_fd() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool remote_ = false;
  std::string said_;  ///< read from the channel, not yet asked for
  int status_ = -1;
};

}  // namespace arpma::test
