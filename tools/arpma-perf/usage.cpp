// The --help text; README.md in this folder says the same at more length.
#include "args.hpp"

namespace arpma_perf {

std::string usage_text() {
  return R"(usage: arpma-perf server [--addr A] [--port N] [--provider P] [--once | --clients N]
       arpma-perf client [--addr A] [--port N] [--provider P] [--test lat|bw]
                         [--op OP] [--size LIST] [--qd N] [--conns N]
                         [--iters N | --duration S] [--warmup N]
                         [--mode coroutine|busy-poll] [--json FILE]
       arpma-perf --help

RDMA latency and bandwidth between an arpma-perf server and client.

common:
  --addr A          server address (default 127.0.0.1)
  --port N          server port (default 18515; the server takes 0 = any free port)
  --provider P      auto|soft|verbs (default auto: verbs when an RDMA device exists)
server:
  --once            exit after the first client's run (same as --clients 1)
  --clients N       exit after N client runs (default: serve until SIGINT/SIGTERM)
client:
  --test T          lat: one operation in flight per connection (default)
                    bw: --qd operations in flight per connection
  --op OP           write (default) | read | send | atomic_write | flush
                    send: lat is a ping-pong (the server echoes), bw is one-way
                    flush: a write of --size bytes then a flush of that range
  --size LIST       message sizes in bytes: 64,4k,1M or A:B (A, 2A, 4A ... B);
                    1..16M (the server's region); atomic_write: 8 (the default)
  --qd N            operations in flight per connection, 1..256 (bw default 16, lat 1)
  --conns N         connections, 1..64, all on one thread (default 1)
  --iters N         measured operations per connection and size (default 10000)
  --duration S      or: seconds per size (decimals allowed)
  --warmup N        unmeasured operations per connection before each size (default 100)
  --mode M          coroutine: co_await, sleeping on the completion channel (default)
                    busy-poll: co_await, the CQ polled for 1 ms before sleeping
  --json FILE       also write the results as one JSON object to FILE

Latency is from posting an operation to its own completion (send lat: to the echo's
arrival). The summary table prints when the run ends or on SIGINT/SIGTERM (after draining
the operations in flight); exit status: 0 done, 1 run failed, 2 bad arguments,
130 interrupted by SIGINT, 143 by SIGTERM.
)";
}

}  // namespace arpma_perf
