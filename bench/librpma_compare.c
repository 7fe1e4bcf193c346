/* Written against librpma's API only, built against Debian's librpma; run as
 * it is (librpma) and with LD_LIBRARY_PATH=<build>/librpma-abi (arpma's
 * drop-in): the same binary, two libraries, one machine (issue 6 benchmark).
 *
 *   librpma_compare ADDR PORT latency N   64 B write round trips (rpma_write +
 *                                         rpma_cq_wait + rpma_cq_get_wc): median, p99 (us)
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
    struct rpma_conn_req* req = NULL;
    check(rpma_ep_next_conn_req(ep, NULL, &req), "next_conn_req");
    struct rpma_conn_private_data pdata = {desc, sizeof desc};
    struct rpma_conn* conn = NULL;
    check(rpma_conn_req_connect(&req, &pdata, &conn), "accept");
    enum rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    check(rpma_conn_next_event(conn, &ev), "established");
    check(rpma_conn_next_event(conn, &ev), "closed");
    (void)rpma_conn_disconnect(conn);
    (void)rpma_conn_delete(&conn);
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

static void latency(struct rpma_peer* peer, const char* addr, const char* port, int n) {
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
    struct ibv_wc wc;
    int rc;
    while ((rc = rpma_cq_get_wc(cq, 1, &wc, NULL)) == RPMA_E_NO_COMPLETION)
      check(rpma_cq_wait(cq), "wait");
    check(rc, "get_wc");
    if (wc.status != IBV_WC_SUCCESS) exit(1);
    if (i >= 100) us[i - 100] = now_us() - t0;
  }
  qsort(us, (size_t)n, sizeof *us, cmp);
  printf("latency_us median %.2f p99 %.2f\n", us[n / 2], us[n * 99 / 100]);
  free(us);
  (void)rpma_mr_dereg(&mr);
  (void)rpma_mr_remote_delete(&remote);
  disconnect(&conn);
}

int main(int argc, char** argv) {
  const char* role = argc == 6 ? argv[5] : "both";
  if ((argc != 5 && argc != 6) ||
      (strcmp(role, "both") != 0 && strcmp(role, "server") != 0 && strcmp(role, "client") != 0)) {
    fprintf(stderr, "usage: %s ADDR PORT latency|connect N [server|client]\n", argv[0]);
    return 2;
  }
  const char *addr = argv[1], *port = argv[2], *what = argv[3];
  const int n = atoi(argv[4]);
  struct ibv_context* dev = NULL;
  check(rpma_utils_get_ibv_context(addr,
                                   strcmp(role, "client") == 0 ? RPMA_UTIL_IBV_CONTEXT_REMOTE
                                                               : RPMA_UTIL_IBV_CONTEXT_LOCAL,
                                   &dev),
        "device");
  struct rpma_peer* peer = NULL;
  check(rpma_peer_new(dev, &peer), "peer");
  const int connections = strcmp(what, "latency") == 0 ? 1 : n;
  if (strcmp(role, "server") == 0) {
    serve(peer, addr, port, connections + 1, -1);
  } else if (strcmp(role, "client") == 0) {
    wait_for_server(peer, addr, port);
    if (strcmp(what, "latency") == 0)
      latency(peer, addr, port, n);
    else
      sequential(peer, addr, port, n);
  } else {
    int ready[2];
    if (pipe(ready) != 0) return 1;
    const pid_t child = fork();
    if (child == 0) {
      serve(peer, addr, port, connections, ready[1]);
      _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) return 1;
    if (strcmp(what, "latency") == 0)
      latency(peer, addr, port, n);
    else
      sequential(peer, addr, port, n);
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  (void)rpma_peer_delete(&peer);
  return 0;
}
