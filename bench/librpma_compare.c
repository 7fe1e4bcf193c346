/* Written against librpma's API only, built against Debian's librpma; run as
 * it is (librpma) and with LD_LIBRARY_PATH=<build>/librpma-abi (arpma's
 * drop-in): the same binary, two libraries, one machine (issue 6 benchmark).
 *
 *   librpma_compare ADDR PORT latency N   64 B write round trips (rpma_write +
 *                                         rpma_cq_wait + rpma_cq_get_wc): median, p99 (us)
 *   librpma_compare ADDR PORT write-busy N
 *                                         the same, rpma_cq_get_wc spinning (ib_write_lat's
 *                                         way): no rpma_cq_wait
 *   librpma_compare ADDR PORT pingpong N  64 B send ping-pongs, both ends spinning on
 *                                         rpma_cq_get_wc as ib_send_lat does: the client
 *                                         posts the echo's receive, then its send; the round
 *                                         trip ends with the echo (median, p99, us)
 *   librpma_compare ADDR PORT connect N   N sequential connections (conn_req_new, connect,
 *                                         ESTABLISHED, disconnect, CLOSED): per second
 *   librpma_compare ADDR PORT connect N server|client
 *                                         the two sides in two processes (two hosts:
 *                                         bench/conn_rtt.sh); the client first connects
 *                                         once, untimed, retrying for up to 60 s until the
 *                                         server listens, which serves that one and N more
 *
 * Otherwise a forked child serves (the same library). Bounded: N operations; every wait
 * has a 10 s alarm (120 s for a server's first request). */
#include <librpma.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", what, rpma_err_2str(rc));
    exit(1);
  }
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static char memory[4096];

/* Accepts one connection with `pdata` and waits until the client closes it. */
static void serve_one(struct rpma_ep* ep, void* pdata, uint8_t len) {
  struct rpma_conn_req* req = NULL;
  check(rpma_ep_next_conn_req(ep, NULL, &req), "next_conn_req");
  struct rpma_conn_private_data data = {pdata, len};
  struct rpma_conn* conn = NULL;
  check(rpma_conn_req_connect(&req, len > 0 ? &data : NULL, &conn), "accept");
  enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  check(rpma_conn_next_event(conn, &ev), "established");
  check(rpma_conn_next_event(conn, &ev), "closed");
  (void)rpma_conn_disconnect(conn);
  (void)rpma_conn_delete(&conn);
}

/* Accepts `count` connections one after the other, each with the region's descriptor. */
static void serve(struct rpma_peer* peer, const char* addr, const char* port, int count,
                  int ready) {
  struct rpma_ep* ep = NULL;
  check(rpma_ep_listen(peer, addr, port, &ep), "listen");
  struct rpma_mr_local* mr = NULL;
  check(rpma_mr_reg(peer, memory, sizeof memory, RPMA_MR_USAGE_WRITE_DST, &mr), "mr_reg");
  char desc[21];
  check(rpma_mr_get_descriptor(mr, desc), "descriptor");
  if (ready >= 0 && write(ready, "r", 1) != 1) exit(1);
  for (int i = 0; i < count; ++i) {
    alarm(i == 0 && ready < 0 ? 120 : 10);
    serve_one(ep, desc, sizeof desc);
  }
  (void)rpma_mr_dereg(&mr);
  (void)rpma_ep_shutdown(&ep);
}

static struct rpma_conn* connect_one(struct rpma_peer* peer, const char* addr, const char* port) {
  for (int tries = 0;; ++tries) {
    struct rpma_conn_req* req = NULL;
    check(rpma_conn_req_new(peer, addr, port, NULL, &req), "conn_req_new");
    struct rpma_conn* conn = NULL;
    check(rpma_conn_req_connect(&req, NULL, &conn), "connect");
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    check(rpma_conn_next_event(conn, &ev), "event");
    if (ev == RPMA_CONN_ESTABLISHED) return conn;
    (void)rpma_conn_delete(&conn);
    if (tries > 50) exit(1);
    usleep(10000);
  }
}

static void disconnect(struct rpma_conn** conn) {
  enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  check(rpma_conn_disconnect(*conn), "disconnect");
  check(rpma_conn_next_event(*conn, &ev), "closed");
  (void)rpma_conn_delete(conn);
}

/* One untimed connection, retried every 20 ms for up to 60 s: a remote server may start later. */
static void wait_for_server(struct rpma_peer* peer, const char* addr, const char* port) {
  alarm(90);
  const double deadline = now_us() + 60e6;
  while (now_us() < deadline) {
    struct rpma_conn_req* req = NULL;
    struct rpma_conn* conn = NULL;
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    if (rpma_conn_req_new(peer, addr, port, NULL, &req) == 0 &&
        rpma_conn_req_connect(&req, NULL, &conn) == 0 && rpma_conn_next_event(conn, &ev) == 0 &&
        ev == RPMA_CONN_ESTABLISHED) {
      disconnect(&conn);
      return;
    }
    if (conn != NULL) (void)rpma_conn_delete(&conn);
    if (req != NULL) (void)rpma_conn_req_delete(&req);
    usleep(20000);
  }
  fprintf(stderr, "no server at %s:%s within 60 s\n", addr, port);
  exit(1);
}

static void sequential(struct rpma_peer* peer, const char* addr, const char* port, int n) {
  const double t0 = now_us();
  for (int i = 0; i < n; ++i) {
    alarm(10);
    struct rpma_conn* conn = connect_one(peer, addr, port);
    disconnect(&conn);
  }
  printf("connect_per_s %.1f\n", n / ((now_us() - t0) / 1e6));
}

/* The next completion of `cq`: spinning (`busy`) or sleeping in rpma_cq_wait. */
static struct ibv_wc next_wc(struct rpma_cq* cq, int busy) {
  struct ibv_wc wc;
  int rc;
  while ((rc = rpma_cq_get_wc(cq, 1, &wc, NULL)) == RPMA_E_NO_COMPLETION)
    if (!busy) check(rpma_cq_wait(cq), "wait");
  check(rc, "get_wc");
  if (wc.status != IBV_WC_SUCCESS) {
    fprintf(stderr, "completion status %d\n", (int)wc.status);
    exit(1);
  }
  return wc;
}

static void print_latency(const char* what, double* us, int n) {
  qsort(us, (size_t)n, sizeof *us, cmp);
  printf("%s median %.2f p99 %.2f\n", what, us[n / 2], us[n * 99 / 100]);
}

static void latency(struct rpma_peer* peer, const char* addr, const char* port, int n, int busy) {
  struct rpma_conn* conn = connect_one(peer, addr, port);
  struct rpma_conn_private_data pdata;
  check(rpma_conn_get_private_data(conn, &pdata), "private data");
  struct rpma_mr_remote* remote = NULL;
  check(rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, &remote), "remote");
  static char src[64];
  struct rpma_mr_local* mr = NULL;
  check(rpma_mr_reg(peer, src, sizeof src, RPMA_MR_USAGE_WRITE_SRC, &mr), "mr_reg");
  struct rpma_cq* cq = NULL;
  check(rpma_conn_get_cq(conn, &cq), "cq");
  double* us = malloc(sizeof(double) * (size_t)n);
  if (us == NULL) exit(1);
  for (int i = 0; i < n + 100; ++i) {
    alarm(10);
    const double t0 = now_us();
    check(rpma_write(conn, remote, 0, mr, 0, sizeof src, RPMA_F_COMPLETION_ALWAYS, NULL), "write");
    (void)next_wc(cq, busy);
    if (i >= 100) us[i - 100] = now_us() - t0;
  }
  print_latency("latency_us", us, n);
  free(us);
  (void)rpma_mr_dereg(&mr);
  (void)rpma_mr_remote_delete(&remote);
  disconnect(&conn);
}

/* Send ping-pong (pingpong N). Each side keeps `ping_recvs` receives posted, one per slot of
 * its region, and sends from the slot after them; a send completion (the peer's ACK) is
 * counted off the critical path, and at most `ping_sends` are left outstanding. */
enum { ping_size = 64, ping_recvs = 4, ping_sends = 4, ping_warmup = 100 };
static char ping_memory[ping_size * (ping_recvs + 1)];

struct pinger {
  struct rpma_conn* conn;
  struct rpma_cq* cq;
  struct rpma_mr_local* mr;
  int sends_out;
};

/* Spins until a receive completes (sends completing meanwhile are counted); its slot. */
static uintptr_t ping_wait_recv(struct pinger* p) {
  for (;;) {
    const struct ibv_wc wc = next_wc(p->cq, 1);
    if (wc.opcode == IBV_WC_SEND) {
      --p->sends_out;
      continue;
    }
    if (wc.opcode != IBV_WC_RECV || wc.byte_len != ping_size) {
      fprintf(stderr, "unexpected completion: opcode %d, %u bytes\n", (int)wc.opcode, wc.byte_len);
      exit(1);
    }
    return (uintptr_t)wc.wr_id;
  }
}

static void ping_send(struct pinger* p) {
  while (p->sends_out >= ping_sends) {
    const struct ibv_wc wc = next_wc(p->cq, 1);
    if (wc.opcode != IBV_WC_SEND) exit(1); /* only the peer's next message could come: none */
    --p->sends_out;
  }
  check(
      rpma_send(p->conn, p->mr, ping_size * ping_recvs, ping_size, RPMA_F_COMPLETION_ALWAYS, NULL),
      "send");
  ++p->sends_out;
}

static void ping_recv(struct pinger* p, uintptr_t slot) {
  check(rpma_recv(p->conn, p->mr, slot * ping_size, ping_size, (const void*)slot), "recv");
}

static struct rpma_mr_local* ping_mr(struct rpma_peer* peer) {
  struct rpma_mr_local* mr = NULL;
  check(rpma_mr_reg(peer, ping_memory, sizeof ping_memory, RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV,
                    &mr),
        "mr_reg");
  return mr;
}

/* The echo side: its receives are posted on the request, before it accepts, so that the
 * first ping cannot find the receive queue empty (an RNR wait of 655 ms on rdma_cm's QPs). */
static void serve_pingpong(struct rpma_peer* peer, const char* addr, const char* port, int n,
                           int ready) {
  struct rpma_ep* ep = NULL;
  check(rpma_ep_listen(peer, addr, port, &ep), "listen");
  struct pinger p = {NULL, NULL, ping_mr(peer), 0};
  if (ready >= 0 && write(ready, "r", 1) != 1) exit(1);
  if (ready < 0) { /* a server alone: the client's first connection only finds it */
    alarm(120);
    serve_one(ep, NULL, 0);
  }
  alarm(10);
  struct rpma_conn_req* req = NULL;
  check(rpma_ep_next_conn_req(ep, NULL, &req), "next_conn_req");
  for (uintptr_t slot = 0; slot < ping_recvs; ++slot)
    check(rpma_conn_req_recv(req, p.mr, slot * ping_size, ping_size, (const void*)slot), "recv");
  check(rpma_conn_req_connect(&req, NULL, &p.conn), "accept");
  enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
  check(rpma_conn_next_event(p.conn, &ev), "established");
  check(rpma_conn_get_cq(p.conn, &p.cq), "cq");
  for (int i = 0; i < n + ping_warmup; ++i) {
    alarm(10);
    ping_recv(&p, ping_wait_recv(&p));
    ping_send(&p);
  }
  check(rpma_conn_next_event(p.conn, &ev), "closed");
  (void)rpma_conn_disconnect(p.conn);
  (void)rpma_conn_delete(&p.conn);
  (void)rpma_mr_dereg(&p.mr);
  (void)rpma_ep_shutdown(&ep);
}

static void pingpong(struct rpma_peer* peer, const char* addr, const char* port, int n) {
  struct pinger p = {connect_one(peer, addr, port), NULL, ping_mr(peer), 0};
  check(rpma_conn_get_cq(p.conn, &p.cq), "cq");
  double* us = malloc(sizeof(double) * (size_t)n);
  if (us == NULL) exit(1);
  for (int i = 0; i < n + ping_warmup; ++i) {
    alarm(10);
    const double t0 = now_us();
    ping_recv(&p, 0);
    ping_send(&p);
    (void)ping_wait_recv(&p);
    if (i >= ping_warmup) us[i - ping_warmup] = now_us() - t0;
  }
  print_latency("pingpong_us", us, n);
  free(us);
  while (p.sends_out > 0) { /* the last sends' ACKs, before the connection goes */
    (void)next_wc(p.cq, 1);
    --p.sends_out;
  }
  (void)rpma_mr_dereg(&p.mr);
  disconnect(&p.conn);
}

static struct rpma_peer* open_peer(const char* addr, enum rpma_util_ibv_context_type type) {
  struct ibv_context* dev = NULL;
  check(rpma_utils_get_ibv_context(addr, type, &dev), "device");
  struct rpma_peer* peer = NULL;
  check(rpma_peer_new(dev, &peer), "peer");
  return peer;
}

/* The client side of WHAT. */
static void run_client(struct rpma_peer* peer, const char* addr, const char* port, const char* what,
                       int n) {
  if (strcmp(what, "latency") == 0 || strcmp(what, "write-busy") == 0)
    latency(peer, addr, port, n, strcmp(what, "write-busy") == 0);
  else if (strcmp(what, "pingpong") == 0)
    pingpong(peer, addr, port, n);
  else
    sequential(peer, addr, port, n);
}

/* The server side of WHAT: `connections` accepted (ping-pong: one, echoing n + warm-up). */
static void run_server(struct rpma_peer* peer, const char* addr, const char* port, const char* what,
                       int n, int connections, int ready) {
  if (strcmp(what, "pingpong") == 0)
    serve_pingpong(peer, addr, port, n, ready);
  else
    serve(peer, addr, port, connections, ready);
}

int main(int argc, char** argv) {
  const char* role = argc == 6 ? argv[5] : "both";
  const char* modes[] = {"latency", "write-busy", "pingpong", "connect"};
  int known = 0;
  for (size_t i = 0; argc >= 5 && i < sizeof modes / sizeof *modes; ++i)
    known |= strcmp(argv[3], modes[i]) == 0;
  if ((argc != 5 && argc != 6) || !known ||
      (strcmp(role, "both") != 0 && strcmp(role, "server") != 0 && strcmp(role, "client") != 0)) {
    fprintf(stderr, "usage: %s ADDR PORT latency|write-busy|pingpong|connect N [server|client]\n",
            argv[0]);
    return 2;
  }
  const char *addr = argv[1], *port = argv[2], *what = argv[3];
  const int n = atoi(argv[4]);
  if (n < 1) {
    fprintf(stderr, "N must be at least 1\n");
    return 2;
  }
  const int connections = strcmp(what, "connect") == 0 ? n : 1;
  struct rpma_peer* peer = NULL;
  if (strcmp(role, "server") == 0) {
    peer = open_peer(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL);
    run_server(peer, addr, port, what, n, connections + 1, -1);
  } else if (strcmp(role, "client") == 0) {
    peer = open_peer(addr, RPMA_UTIL_IBV_CONTEXT_REMOTE);
    wait_for_server(peer, addr, port);
    run_client(peer, addr, port, what, n);
  } else {
    /* Forked before either side opens the device: a verbs context does not survive a fork
     * (on rxe the child's posts fail with EACCES on the parent's uverbs fd). */
    int ready[2];
    if (pipe(ready) != 0) return 1;
    const pid_t child = fork();
    if (child == 0) {
      peer = open_peer(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL);
      run_server(peer, addr, port, what, n, connections, ready[1]);
      (void)rpma_peer_delete(&peer);
      _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) return 1;
    peer = open_peer(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL);
    run_client(peer, addr, port, what, n);
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  (void)rpma_peer_delete(&peer);
  return 0;
}
