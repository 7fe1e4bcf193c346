/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_lifecycle.c -- whole connections on one machine: a forked child is
 * the server (rpma_ep_listen, rpma_ep_next_conn_req, accept or reject), the
 * parent the client (rpma_conn_req_new, rpma_conn_req_connect). Events,
 * private data both ways, the queues of each side (rcq, shared completion
 * channel or not), non-blocking event fds, disconnect and delete.
 *
 *   compat_lifecycle                        device section skipped
 *   compat_lifecycle ADDR SILENT NO_ROUTE [--device-names]
 *                                           the device section (SILENT and
 *                                           NO_ROUTE are not used)
 *
 * Output order: the client's lines as they happen, then the server's (the
 * child writes them to a temporary file, the parent prints them after the
 * child has been reaped), each prefixed "client: " / "server: ".
 * Every wait is bounded: poll with timeouts, alarm() in both processes as a
 * last resort, and the child is killed and reaped if it outlives its time.
 */
#include "compat.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PORT "7305"
#define CLIENT_HELLO "compat-client-hello"
#define SERVER_HELLO "compat-server-hello"
#define WAIT_MS 10000 /* the longest any single wait may take */

static const char* side = "";

static void say(const char* name, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(const char* name, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char full[256];
  snprintf(full, sizeof full, "%s: %s", side, name);
  check(full, "%s", text);
}

static void say_ret(const char* name, int ret) { say(name, "ret=%s", ret_name(ret)); }
static void say_ptr(const char* name, int ret, const void* p) {
  say(name, "ret=%s out=%s", ret_name(ret), ptr_state(p));
}
static void say_fd(const char* name, int ret, int fd) {
  if (fd == SENTINEL_INT)
    say(name, "ret=%s out=untouched", ret_name(ret));
  else
    say(name, "ret=%s fd>=0=%s", ret_name(ret), fd >= 0 ? "yes" : "no");
}

static const char* event_name(int ev) {
  if (ev == SENTINEL_INT) return "untouched";
  return rpma_utils_conn_event_2str((enum rpma_conn_event)ev);
}

/* whether fd becomes readable within ms */
static int wait_readable(int fd, int ms) {
  struct pollfd pfd = {fd, POLLIN, 0};
  for (;;) {
    int n = poll(&pfd, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

/* rpma_conn_next_event after waiting for its fd (bounded) */
static int next_event(struct rpma_conn* conn, int* ev) {
  int fd = -1;
  *ev = SENTINEL_INT;
  if (rpma_conn_get_event_fd(conn, &fd) != 0 || !wait_readable(fd, WAIT_MS)) return INT_MIN;
  return rpma_conn_next_event(conn, (enum rpma_conn_event*)ev);
}

static void say_event(const char* name, struct rpma_conn* conn) {
  int ev;
  int ret = next_event(conn, &ev);
  if (ret == INT_MIN)
    say(name, "no event within %d ms", WAIT_MS);
  else
    say(name, "ret=%s event=%s", ret_name(ret), event_name(ev));
}

static int set_nonblock(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

/* private data: whether at least the sent length came, and the text up to its NUL */
static void say_pdata(const char* name, int ret, const struct rpma_conn_private_data* pd,
                      const char* sent) {
  size_t n = strlen(sent) + 1;
  char text[64] = "";
  if (pd->ptr != NULL && pd->ptr != SENTINEL_PTR && pd->len >= n) {
    memcpy(text, pd->ptr, n < sizeof text ? n : sizeof text - 1);
    text[sizeof text - 1] = '\0';
  }
  say(name, "ret=%s ptr=%s len>=%zu=%s text=%s", ret_name(ret),
      pd->ptr == NULL ? "NULL" : (pd->ptr == SENTINEL_PTR ? "untouched" : "set"), n,
      pd->len >= n ? "yes" : "no", text[0] ? text : "(none)");
}

/*
 * the queues of a connection: qp number, CQ, receive CQ, completion fds (with a shared
 * completion channel, rpma_cq_get_fd gives the shared channel's fd for both CQs).
 */
static void say_queues(struct rpma_conn* conn) {
  uint32_t qp = SENTINEL_U32;
  int ret = rpma_conn_get_qp_num(conn, &qp);
  say("conn_get_qp_num", "ret=%s non-zero=%s", ret_name(ret),
      qp == SENTINEL_U32 ? "untouched" : (qp != 0 ? "yes" : "no"));
  struct rpma_cq* cq = SENTINEL_PTR;
  ret = rpma_conn_get_cq(conn, &cq);
  say_ptr("conn_get_cq", ret, cq);
  struct rpma_cq* rcq = SENTINEL_PTR;
  ret = rpma_conn_get_rcq(conn, &rcq);
  say_ptr("conn_get_rcq", ret, rcq);
  int fd = SENTINEL_INT;
  ret = rpma_conn_get_compl_fd(conn, &fd);
  say_fd("conn_get_compl_fd", ret, fd);
  if (cq != SENTINEL_PTR && cq != NULL) {
    fd = SENTINEL_INT;
    ret = rpma_cq_get_fd(cq, &fd);
    say_fd("cq_get_fd(cq)", ret, fd);
  }
  if (rcq != SENTINEL_PTR && rcq != NULL) {
    fd = SENTINEL_INT;
    ret = rpma_cq_get_fd(rcq, &fd);
    say_fd("cq_get_fd(rcq)", ret, fd);
  }
}

/* rpma_conn_next_event on a non-blocking event fd with nothing pending */
static void say_nonblocking_event(const char* name, struct rpma_conn* conn) {
  int fd = -1;
  (void)rpma_conn_get_event_fd(conn, &fd);
  if (fd < 0 || set_nonblock(fd, 1) != 0) {
    say(name, "cannot set O_NONBLOCK");
    return;
  }
  int ev = SENTINEL_INT;
  int ret = rpma_conn_next_event(conn, (enum rpma_conn_event*)&ev);
  say(name, "ret=%s event=%s", ret_name(ret), event_name(ev));
  (void)set_nonblock(fd, 0);
}

static struct rpma_peer* make_peer(const char* addr) {
  struct ibv_context* ctx = NULL;
  struct rpma_peer* peer = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
  if (ret == 0 && ctx != NULL) ret = rpma_peer_new(ctx, &peer);
  if (ret != 0 || peer == NULL) {
    say("peer", "cannot make one (ret=%s)", ret_name(ret));
    return NULL;
  }
  return peer;
}

/* ---- the server (child) ------------------------------------------------- */

/* sync bytes the server writes: 'L' listening (or 'F' failed), 'E' done with its checks of the
 * established connection, 'R' rejected the second request */
static void tell(int fd, char c) {
  ssize_t n = write(fd, &c, 1);
  (void)n;
}

/* the next request, waited for at most WAIT_MS; NULL (and a line) when none */
static struct rpma_conn_req* next_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                                      const char* name) {
  int fd = -1;
  (void)rpma_ep_get_fd(ep, &fd);
  if (fd < 0 || !wait_readable(fd, WAIT_MS)) {
    say(name, "no request within %d ms", WAIT_MS);
    return NULL;
  }
  struct rpma_conn_req* req = SENTINEL_PTR;
  int ret = rpma_ep_next_conn_req(ep, cfg, &req);
  say_ptr(name, ret, req);
  return ret == 0 ? req : NULL;
}

static int server(const char* addr, int sync_fd) {
  side = "server";
  struct rpma_peer* peer = make_peer(addr);
  if (peer == NULL) {
    tell(sync_fd, 'F');
    return 1;
  }
  struct rpma_ep* ep = SENTINEL_PTR;
  int ret = rpma_ep_listen(peer, addr, PORT, &ep);
  say_ptr("ep_listen(peer, ADDR, port)", ret, ep);
  if (ret != 0) {
    tell(sync_fd, 'F');
    (void)rpma_peer_delete(&peer);
    return 1;
  }
  int ep_fd = SENTINEL_INT;
  ret = rpma_ep_get_fd(ep, &ep_fd);
  say_fd("ep_get_fd", ret, ep_fd);

  /* nothing pending yet (the client waits for 'L'): a non-blocking fd */
  if (ep_fd >= 0 && ep_fd != SENTINEL_INT && set_nonblock(ep_fd, 1) == 0) {
    struct rpma_conn_req* req = SENTINEL_PTR;
    ret = rpma_ep_next_conn_req(ep, NULL, &req);
    say_ptr("ep_next_conn_req on a non-blocking fd, nothing pending", ret, req);
    if (ret == 0) (void)rpma_conn_req_delete(&req);
    (void)set_nonblock(ep_fd, 0);
  }
  tell(sync_fd, 'L');

  /* ---- 1: accepted, with private data both ways; server cfg: defaults ---- */
  struct rpma_conn_req* req = next_req(ep, NULL, "ep_next_conn_req (first)");
  if (req != NULL) {
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    ret = rpma_conn_req_get_private_data(req, &pd);
    say_pdata("conn_req_get_private_data (the client's)", ret, &pd, CLIENT_HELLO);
    char hello[] = SERVER_HELLO;
    struct rpma_conn_private_data mine = {hello, sizeof hello};
    struct rpma_conn* conn = SENTINEL_PTR;
    ret = rpma_conn_req_connect(&req, &mine, &conn);
    say("conn_req_connect (accept, with private data)", "ret=%s req=%s out=%s", ret_name(ret),
        ptr_state(req), ptr_state(conn));
    if (ret == 0) {
      say_event("next_event (first)", conn);
      pd.ptr = SENTINEL_PTR;
      pd.len = SENTINEL_BYTE;
      ret = rpma_conn_get_private_data(conn, &pd);
      say_pdata("conn_get_private_data (the client's)", ret, &pd, CLIENT_HELLO);
      say_queues(conn);
      say_nonblocking_event("next_event on a non-blocking fd, nothing pending", conn);
      tell(sync_fd, 'E');
      say_event("next_event after the client disconnected", conn);
      say_ret("conn_disconnect", rpma_conn_disconnect(conn));
      ret = rpma_conn_delete(&conn);
      say_ptr("conn_delete", ret, conn);
    } else {
      tell(sync_fd, 'E');
    }
  } else {
    tell(sync_fd, 'E');
  }

  /* ---- 2: rejected (rpma_conn_req_delete on the incoming request) ------- */
  struct rpma_conn_cfg* cfg = NULL;
  (void)rpma_conn_cfg_new(&cfg);
  (void)rpma_conn_cfg_set_rcq_size(cfg, 3);
  (void)rpma_conn_cfg_set_compl_channel(cfg, true);
  req = next_req(ep, cfg, "ep_next_conn_req (second, to reject)");
  if (req != NULL) {
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    ret = rpma_conn_req_get_private_data(req, &pd);
    say("conn_req_get_private_data (none sent)", "ret=%s ptr=%s", ret_name(ret),
        pd.ptr == NULL ? "NULL" : (pd.ptr == SENTINEL_PTR ? "untouched" : "set"));
    ret = rpma_conn_req_delete(&req);
    say_ptr("conn_req_delete (reject)", ret, req);
  }
  tell(sync_fd, 'R');

  /* ---- 3: accepted with cfg rcq=3 shared=true; the server disconnects ---- */
  req = next_req(ep, cfg, "ep_next_conn_req (third)");
  if (req != NULL) {
    struct rpma_conn* conn = SENTINEL_PTR;
    ret = rpma_conn_req_connect(&req, NULL, &conn);
    say("conn_req_connect (accept, no private data)", "ret=%s req=%s out=%s", ret_name(ret),
        ptr_state(req), ptr_state(conn));
    if (ret == 0) {
      say_event("next_event (third)", conn);
      say_queues(conn);
      say_ret("conn_disconnect (first)", rpma_conn_disconnect(conn));
      say_event("next_event after disconnecting", conn);
      ret = rpma_conn_delete(&conn);
      say_ptr("conn_delete (third)", ret, conn);
    }
  }
  (void)rpma_conn_cfg_delete(&cfg);

  ret = rpma_ep_shutdown(&ep);
  say_ptr("ep_shutdown", ret, ep);
  ret = rpma_ep_shutdown(&ep);
  say_ptr("ep_shutdown again (NULL now)", ret, ep);
  ret = rpma_peer_delete(&peer);
  say_ptr("peer_delete", ret, peer);
  return 0;
}

/* ---- the client (parent) ------------------------------------------------ */

/* wait for the server's sync byte (at most WAIT_MS); 0 when none came */
static char await(int fd) {
  char c = 0;
  if (!wait_readable(fd, WAIT_MS) || read(fd, &c, 1) != 1) return 0;
  return c;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * conn_req_new + connect + the first event, retried on REJECTED/UNREACHABLE for at most 5 s
 * (the server should be listening already: it said so; the retry is only a safety net). Only
 * the final outcome is printed; attempts go to stderr.
 */
static struct rpma_conn* connect_to(struct rpma_peer* peer, const char* addr,
                                    const struct rpma_conn_cfg* cfg,
                                    const struct rpma_conn_private_data* pd, const char* what,
                                    int retry) {
  double t0 = now_s();
  char name[200];
  for (int attempt = 1;; ++attempt) {
    struct rpma_conn_req* req = SENTINEL_PTR;
    int ret = rpma_conn_req_new(peer, addr, PORT, cfg, &req);
    if (ret != 0) {
      snprintf(name, sizeof name, "conn_req_new (%s)", what);
      say_ptr(name, ret, req);
      return NULL;
    }
    struct rpma_conn* conn = SENTINEL_PTR;
    ret = rpma_conn_req_connect(&req, pd, &conn);
    if (ret != 0) {
      snprintf(name, sizeof name, "conn_req_connect (%s)", what);
      say(name, "ret=%s req=%s out=%s", ret_name(ret), ptr_state(req), ptr_state(conn));
      return NULL;
    }
    int ev;
    ret = next_event(conn, &ev);
    fprintf(stderr, "client: %s: attempt %d: ret=%s event=%s\n", what, attempt,
            ret == INT_MIN ? "timeout" : ret_name(ret), event_name(ev));
    if (retry && ret == 0 && (ev == RPMA_CONN_REJECTED || ev == RPMA_CONN_UNREACHABLE) &&
        now_s() - t0 < 5.0) {
      (void)rpma_conn_delete(&conn);
      struct timespec pause = {0, 100 * 1000 * 1000};
      nanosleep(&pause, NULL);
      continue;
    }
    snprintf(name, sizeof name, "conn_req_new + conn_req_connect + next_event (%s)", what);
    if (ret == INT_MIN)
      say(name, "no event within %d ms", WAIT_MS);
    else
      say(name, "ret=%s event=%s", ret_name(ret), event_name(ev));
    return conn;
  }
}

static void client(const char* addr, int sync_fd) {
  side = "client";
  char c = await(sync_fd);
  say("server listening", "%s", c == 'L' ? "yes" : "no");
  if (c != 'L') return;
  struct rpma_peer* peer = make_peer(addr);
  if (peer == NULL) return;

  /* ---- 1: accepted; client cfg rcq=5 shared=true ------------------------ */
  struct rpma_conn_cfg* cfg = NULL;
  (void)rpma_conn_cfg_new(&cfg);
  (void)rpma_conn_cfg_set_rcq_size(cfg, 5);
  (void)rpma_conn_cfg_set_compl_channel(cfg, true);
  char hello[] = CLIENT_HELLO;
  struct rpma_conn_private_data mine = {hello, sizeof hello};
  struct rpma_conn* conn = connect_to(peer, addr, cfg, &mine, "first", 1);
  if (conn != NULL) {
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    int ret = rpma_conn_get_private_data(conn, &pd);
    say_pdata("conn_get_private_data (the server's)", ret, &pd, SERVER_HELLO);
    say_queues(conn);
    say_nonblocking_event("next_event on a non-blocking fd, nothing pending", conn);
    c = await(sync_fd); /* the server's checks of the live connection are done */
    say("server done with the live connection", "%s", c == 'E' ? "yes" : "no");
    say_ret("conn_disconnect", rpma_conn_disconnect(conn));
    say_event("next_event after disconnecting", conn);
    ret = rpma_conn_delete(&conn);
    say_ptr("conn_delete", ret, conn);
  } else {
    (void)await(sync_fd);
  }

  /* ---- 2: rejected by the server ----------------------------------------- */
  conn = connect_to(peer, addr, NULL, NULL, "second, rejected", 0);
  if (conn != NULL) {
    int ret = rpma_conn_delete(&conn);
    say_ptr("conn_delete (rejected)", ret, conn);
  }
  c = await(sync_fd);
  say("server rejected", "%s", c == 'R' ? "yes" : "no");

  /* ---- 3: accepted; client cfg rcq=2 shared=false; the server disconnects first ---- */
  struct rpma_conn_cfg* own = NULL;
  (void)rpma_conn_cfg_new(&own);
  (void)rpma_conn_cfg_set_rcq_size(own, 2);
  (void)rpma_conn_cfg_set_compl_channel(own, false);
  conn = connect_to(peer, addr, own, NULL, "third", 1);
  (void)rpma_conn_cfg_delete(&own);
  if (conn != NULL) {
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    int ret = rpma_conn_get_private_data(conn, &pd);
    say("conn_get_private_data (none sent by the server)", "ret=%s ptr=%s", ret_name(ret),
        pd.ptr == NULL ? "NULL" : (pd.ptr == SENTINEL_PTR ? "untouched" : "set"));
    say_queues(conn);
    say_event("next_event after the server disconnected", conn);
    say_ret("conn_disconnect (after CLOSED)", rpma_conn_disconnect(conn));
    ret = rpma_conn_delete(&conn);
    say_ptr("conn_delete (third)", ret, conn);
  }
  (void)rpma_conn_cfg_delete(&cfg);
  int ret = rpma_peer_delete(&peer);
  say_ptr("peer_delete", ret, peer);
}

static void device_section(const char* addr) {
  char path[] = "/tmp/compat_lifecycle_server_XXXXXX";
  int out = mkstemp(path);
  int sync[2];
  if (out < 0 || pipe(sync) != 0) {
    check("device section", "aborted: no temporary file or pipe");
    return;
  }
  unlink(path);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    check("device section", "aborted: fork failed");
    return;
  }
  if (pid == 0) {
    alarm(60); /* the last resort: nothing here may wait that long */
    close(sync[0]);
    dup2(out, 1);
    close(out);
    int rc = server(addr, sync[1]);
    fflush(stdout);
    _exit(rc);
  }
  close(sync[1]);
  alarm(90);
  client(addr, sync[0]);
  close(sync[0]);

  /* reap the child: at most 30 s more, then kill it */
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 300 && (got = waitpid(pid, &status, WNOHANG)) == 0; ++i) {
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    (void)waitpid(pid, &status, 0);
  }
  alarm(0);

  /* the server's lines, after the client's */
  FILE* f = fdopen(out, "r");
  if (f != NULL) {
    rewind(f);
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
      fputs(line, stdout);
      ++compat_checks;
    }
    fclose(f);
  }
  if (WIFEXITED(status))
    check("server: exit", "status %d", WEXITSTATUS(status));
  else
    check("server: exit", "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
}

int main(int argc, char* argv[]) {
  const char* pos[3] = {NULL, NULL, NULL};
  int npos = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--device-names") == 0) continue;
    if (npos == 3) {
      fprintf(stderr, "usage: %s [ADDR SILENT NO_ROUTE [--device-names]]\n", argv[0]);
      return 2;
    }
    pos[npos++] = argv[i];
  }
  if (npos != 0 && npos != 3) {
    fprintf(stderr, "usage: %s [ADDR SILENT NO_ROUTE [--device-names]]\n", argv[0]);
    return 2;
  }
  if (npos == 3)
    device_section(pos[0]);
  else
    check("device section", "skipped (no address given)");
  return compat_end("compat_lifecycle");
}
