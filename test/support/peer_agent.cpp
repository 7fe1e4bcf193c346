// Starts the peer processes of two-process integration tests run on another node
// (test/support/peer_process.hpp, test/vm/two-nodes-suite.sh):
//
//   peer_agent ADDR PORT ROOT SECONDS
//
// listens on ADDR:PORT for SECONDS at most (or until a connection says "quit"). Each
// connection asks for one process: "exec PATH\nenv VAR=SPEC\n", PATH a program under ROOT.
// The agent runs it with VAR=SPEC:FD added to its own environment (this node's addresses),
// FD a pipe whose bytes it relays as frames {'d', byte}; then 'S' stops the process (answered
// {'s'} once every thread has stopped), 'K' kills and reaps it (answered {'k', status >> 8,
// status & 255}, status 128 + signal or the exit status, then the connection ends), and the
// connection's end kills it. A test node's private link only; still, only programs under ROOT
// and only ARPMA_* variables.
#include "support/peer_process.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

volatile std::sig_atomic_t quitting = 0;  // a connection said "quit"

int listen_on(const char* addr, const char* port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(addr, port, &hints, &found) != 0) return -1;
  int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  if (fd >= 0 && (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
                  ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 16) != 0)) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

/// One line of the request (without its newline), read within 10 s; empty on failure.
std::string read_line(int fd) {
  std::string line;
  while (line.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    char c = 0;
    if (::poll(&p, 1, 10000) != 1 || ::read(fd, &c, 1) != 1) return {};
    if (c == '\n') return line;
    line.push_back(c);
  }
  return {};
}

/// "ARPMA_…=value": only the tests' own variables, never one that changes how a program
/// loads (LD_PRELOAD and the like).
bool test_variable(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || assignment.rfind("ARPMA_", 0) != 0) return false;
  for (std::size_t i = 0; i < eq; ++i) {
    const char c = assignment[i];
    if ((c < 'A' || c > 'Z') && c != '_') return false;
  }
  return true;
}

bool send_all(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

/// Forwards what the child wrote and is waiting in `from` (non-blocking) as 'd' frames;
/// false once the pipe has ended.
bool relay(int from, int to) {
  std::array<char, 256> buf{};
  for (;;) {
    const auto n = ::read(from, buf.data(), buf.size());
    if (n == 0) return false;
    if (n < 0) return true;  // EAGAIN: all of it forwarded
    std::string frames;
    for (ssize_t i = 0; i < n; ++i) frames += std::string{'d', buf[static_cast<std::size_t>(i)]};
    if (!send_all(to, frames)) return false;
  }
}

int reap(pid_t pid, int options) {
  int st = 0;
  if (::waitpid(pid, &st, options) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// Serves one connection (in a process of its own) until the child is killed or the
/// connection ends, within `deadline`.
int serve(int sock, const std::string& root, clock_type::time_point deadline) {
  const auto exec = read_line(sock);
  if (exec.empty()) return 0;  // a client that only waited for the port
  if (exec == "quit") {
    ::kill(::getppid(), SIGTERM);
    return 0;
  }
  const auto env = read_line(sock);
  std::array<char, PATH_MAX> real{};
  if (exec.rfind("exec ", 0) != 0 || env.rfind("env ", 0) != 0 ||
      ::realpath(exec.substr(5).c_str(), real.data()) == nullptr ||
      std::string(real.data()).rfind(root + "/", 0) != 0 || !test_variable(env.substr(4))) {
    std::fprintf(stderr, "peer_agent: refused request '%s' / '%s'\n", exec.c_str(), env.c_str());
    return 1;
  }
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  const pid_t child =
      arpma::test::spawn_with(real.data(), env.substr(4) + ":" + std::to_string(fds[1]), fds[1]);
  ::close(fds[1]);
  if (child < 0) return 1;
  bool piping = true;
  while (clock_type::now() < deadline) {
    std::array<pollfd, 2> p{pollfd{sock, POLLIN, 0}, pollfd{fds[0], POLLIN, 0}};
    if (::poll(p.data(), piping ? 2 : 1, 1000) < 0) break;
    if (piping && p[1].revents != 0) piping = relay(fds[0], sock);
    if (p[0].revents == 0) continue;
    char command = 0;
    if (::read(sock, &command, 1) != 1) break;
    if (command == 'S') {
      ::kill(child, SIGSTOP);
      (void)reap(child, WUNTRACED);
      if (piping) piping = relay(fds[0], sock);
      if (!send_all(sock, "s")) break;
    } else if (command == 'K') {
      ::kill(child, SIGKILL);
      const int status = reap(child, 0);
      if (piping) (void)relay(fds[0], sock);  // the child's end is closed: all of it is there
      (void)send_all(sock,
                     std::string{'k', static_cast<char>(status >> 8), static_cast<char>(status)});
      return 0;
    }
  }
  ::kill(child, SIGKILL);
  (void)reap(child, 0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s ADDR PORT ROOT SECONDS\n", argv[0]);
    return 2;
  }
  std::array<char, PATH_MAX> root{};
  const int listener = listen_on(argv[1], argv[2]);
  if (listener < 0 || ::realpath(argv[3], root.data()) == nullptr) {
    std::fprintf(stderr, "peer_agent: cannot listen on %s:%s or no %s\n", argv[1], argv[2],
                 argv[3]);
    return 1;
  }
  const auto deadline = clock_type::now() + std::chrono::seconds(std::atoi(argv[4]));
  (void)std::signal(SIGTERM, [](int) { quitting = 1; });
  std::printf("peer_agent: listening on %s:%s\n", argv[1], argv[2]);
  std::fflush(stdout);
  while (quitting == 0 && clock_type::now() < deadline) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 1000) != 1) continue;
    const int sock = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (sock < 0) continue;
    if (::fork() == 0) {
      ::close(listener);
      ::_exit(serve(sock, root.data(), deadline));
    }
    ::close(sock);
  }
  std::printf("peer_agent: %s\n", quitting != 0 ? "told to quit" : "out of time");
  return 0;
}
