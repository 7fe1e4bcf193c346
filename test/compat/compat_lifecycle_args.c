/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_lifecycle_args.c -- argument errors of the endpoint, request and
 * connection functions (rpma_ep_*, rpma_conn_req_connect/get_private_data,
 * rpma_conn_*, rpma_cq_get_fd), with out-parameter sentinels.
 *
 *   compat_lifecycle_args                  NULL objects only (no device)
 *   compat_lifecycle_args ADDR SILENT NO_ROUTE [--device-names]
 *                                          also the device section: the same
 *                                          calls with real objects and NULL
 *                                          or bad other arguments
 *
 * ADDR: an address of an RDMA device of this machine (the Soft-RoCE guest's
 * $RXE_VM_IP); SILENT and NO_ROUTE are accepted (run.sh passes them to every
 * program) and not used. Ports 7306 (listened on) and 7307 (nobody listens).
 */
#include "compat.h"

#include <poll.h>
#include <unistd.h>

#define PORT_LISTEN "7306"
#define PORT_NOBODY "7307"

/* an int out-parameter that is an fd: its value is not stable, only whether it is one */
static void check_fd(const char* name, int ret, int fd) {
  if (fd == SENTINEL_INT)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s fd>=0=%s", ret_name(ret), fd >= 0 ? "yes" : "no");
}

static void check_pdata(const char* name, int ret, const struct rpma_conn_private_data* pd) {
  if (pd->ptr == SENTINEL_PTR && pd->len == SENTINEL_BYTE)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s ptr=%s len=%u", ret_name(ret), pd->ptr == NULL ? "NULL" : "set",
          (unsigned)pd->len);
}

static void check_event(const char* name, int ret, int ev) {
  if (ev == SENTINEL_INT)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s value=%s", ret_name(ret),
          rpma_utils_conn_event_2str((enum rpma_conn_event)ev));
}

/* ---- NULL objects: no device involved ------------------------------------ */

static void null_objects(void) {
  int ret;
  /* rpma_ep_listen */
  struct rpma_ep* ep = SENTINEL_PTR;
  ret = rpma_ep_listen(NULL, "127.0.0.1", PORT_LISTEN, &ep);
  check_ptr("ep_listen(peer=NULL, addr, port, &ep)", ret, ep);
  ep = SENTINEL_PTR;
  ret = rpma_ep_listen(NULL, NULL, NULL, &ep);
  check_ptr("ep_listen(NULL, NULL, NULL, &ep)", ret, ep);
  check_ret("ep_listen(NULL, NULL, NULL, NULL)", rpma_ep_listen(NULL, NULL, NULL, NULL));

  /* rpma_ep_shutdown */
  check_ret("ep_shutdown(NULL)", rpma_ep_shutdown(NULL));
  ep = NULL;
  ret = rpma_ep_shutdown(&ep);
  check_ptr("ep_shutdown(&NULL)", ret, ep);

  /* rpma_ep_get_fd */
  int fd = SENTINEL_INT;
  ret = rpma_ep_get_fd(NULL, &fd);
  check_fd("ep_get_fd(NULL, &fd)", ret, fd);
  check_ret("ep_get_fd(NULL, NULL)", rpma_ep_get_fd(NULL, NULL));

  /* rpma_ep_next_conn_req */
  struct rpma_conn_req* req = SENTINEL_PTR;
  ret = rpma_ep_next_conn_req(NULL, NULL, &req);
  check_ptr("ep_next_conn_req(NULL, cfg NULL, &req)", ret, req);
  struct rpma_conn_cfg* cfg = NULL;
  (void)rpma_conn_cfg_new(&cfg);
  req = SENTINEL_PTR;
  ret = rpma_ep_next_conn_req(NULL, cfg, &req);
  check_ptr("ep_next_conn_req(NULL, cfg, &req)", ret, req);
  check_ret("ep_next_conn_req(NULL, NULL, NULL)", rpma_ep_next_conn_req(NULL, NULL, NULL));
  (void)rpma_conn_cfg_delete(&cfg);

  /* rpma_conn_req_connect: req_ptr NULL or pointing to NULL (nothing to consume) */
  struct rpma_conn* conn = SENTINEL_PTR;
  ret = rpma_conn_req_connect(NULL, NULL, &conn);
  check_ptr("conn_req_connect(NULL, pdata NULL, &conn)", ret, conn);
  check_ret("conn_req_connect(NULL, NULL, NULL)", rpma_conn_req_connect(NULL, NULL, NULL));
  req = NULL;
  conn = SENTINEL_PTR;
  ret = rpma_conn_req_connect(&req, NULL, &conn);
  check("conn_req_connect(&NULL, pdata NULL, &conn)", "ret=%s req=%s out=%s", ret_name(ret),
        ptr_state(req), ptr_state(conn));
  char text[] = "compat";
  struct rpma_conn_private_data pd = {text, sizeof text};
  conn = SENTINEL_PTR;
  ret = rpma_conn_req_connect(&req, &pd, &conn);
  check("conn_req_connect(&NULL, pdata, &conn)", "ret=%s req=%s out=%s", ret_name(ret),
        ptr_state(req), ptr_state(conn));
  ret = rpma_conn_req_connect(&req, NULL, NULL);
  check("conn_req_connect(&NULL, pdata NULL, NULL)", "ret=%s req=%s", ret_name(ret),
        ptr_state(req));

  /* rpma_conn_req_get_private_data */
  pd.ptr = SENTINEL_PTR;
  pd.len = SENTINEL_BYTE;
  ret = rpma_conn_req_get_private_data(NULL, &pd);
  check_pdata("conn_req_get_private_data(NULL, &pdata)", ret, &pd);
  check_ret("conn_req_get_private_data(NULL, NULL)", rpma_conn_req_get_private_data(NULL, NULL));

  /* rpma_conn_* */
  fd = SENTINEL_INT;
  ret = rpma_conn_get_event_fd(NULL, &fd);
  check_fd("conn_get_event_fd(NULL, &fd)", ret, fd);
  check_ret("conn_get_event_fd(NULL, NULL)", rpma_conn_get_event_fd(NULL, NULL));

  int ev = SENTINEL_INT;
  ret = rpma_conn_next_event(NULL, (enum rpma_conn_event*)&ev);
  check_event("conn_next_event(NULL, &event)", ret, ev);
  check_ret("conn_next_event(NULL, NULL)", rpma_conn_next_event(NULL, NULL));

  pd.ptr = SENTINEL_PTR;
  pd.len = SENTINEL_BYTE;
  ret = rpma_conn_get_private_data(NULL, &pd);
  check_pdata("conn_get_private_data(NULL, &pdata)", ret, &pd);
  check_ret("conn_get_private_data(NULL, NULL)", rpma_conn_get_private_data(NULL, NULL));

  struct rpma_peer_cfg* pcfg = NULL;
  (void)rpma_peer_cfg_new(&pcfg);
  check_ret("conn_apply_remote_peer_cfg(NULL, pcfg)", rpma_conn_apply_remote_peer_cfg(NULL, pcfg));
  check_ret("conn_apply_remote_peer_cfg(NULL, NULL)", rpma_conn_apply_remote_peer_cfg(NULL, NULL));
  (void)rpma_peer_cfg_delete(&pcfg);

  uint32_t qp = SENTINEL_U32;
  ret = rpma_conn_get_qp_num(NULL, &qp);
  check_u32("conn_get_qp_num(NULL, &qp_num)", ret, qp);
  check_ret("conn_get_qp_num(NULL, NULL)", rpma_conn_get_qp_num(NULL, NULL));

  struct rpma_cq* cq = SENTINEL_PTR;
  ret = rpma_conn_get_cq(NULL, &cq);
  check_ptr("conn_get_cq(NULL, &cq)", ret, cq);
  check_ret("conn_get_cq(NULL, NULL)", rpma_conn_get_cq(NULL, NULL));
  cq = SENTINEL_PTR;
  ret = rpma_conn_get_rcq(NULL, &cq);
  check_ptr("conn_get_rcq(NULL, &rcq)", ret, cq);
  check_ret("conn_get_rcq(NULL, NULL)", rpma_conn_get_rcq(NULL, NULL));

  fd = SENTINEL_INT;
  ret = rpma_conn_get_compl_fd(NULL, &fd);
  check_fd("conn_get_compl_fd(NULL, &fd)", ret, fd);
  check_ret("conn_get_compl_fd(NULL, NULL)", rpma_conn_get_compl_fd(NULL, NULL));

  fd = SENTINEL_INT;
  ret = rpma_cq_get_fd(NULL, &fd);
  check_fd("cq_get_fd(NULL, &fd)", ret, fd);
  check_ret("cq_get_fd(NULL, NULL)", rpma_cq_get_fd(NULL, NULL));

  check_ret("conn_disconnect(NULL)", rpma_conn_disconnect(NULL));
  check_ret("conn_delete(NULL)", rpma_conn_delete(NULL));
  conn = NULL;
  ret = rpma_conn_delete(&conn);
  check_ptr("conn_delete(&NULL)", ret, conn);
}

/* ---- device section ----------------------------------------------------- */

/* a new outgoing request to ADDR:PORT_NOBODY, or NULL (a check line says why) */
static struct rpma_conn_req* new_req(struct rpma_peer* peer, const char* addr, const char* what) {
  struct rpma_conn_req* req = SENTINEL_PTR;
  int ret = rpma_conn_req_new(peer, addr, PORT_NOBODY, NULL, &req);
  if (ret != 0) {
    char name[200];
    snprintf(name, sizeof name, "conn_req_new for %s", what);
    check_ptr(name, ret, req);
    return NULL;
  }
  return req;
}

/* a connect attempt with a bad argument: is the request consumed, is conn untouched */
static void bad_connect(struct rpma_peer* peer, const char* addr, const char* name,
                        const struct rpma_conn_private_data* pd, int conn_null) {
  struct rpma_conn_req* req = new_req(peer, addr, name);
  if (req == NULL) return;
  struct rpma_conn* conn = SENTINEL_PTR;
  int ret = rpma_conn_req_connect(&req, pd, conn_null ? NULL : &conn);
  check(name, "ret=%s req=%s out=%s", ret_name(ret), ptr_state(req),
        conn_null ? "none" : ptr_state(conn));
  if (req != NULL) (void)rpma_conn_req_delete(&req);
  if (!conn_null && conn != SENTINEL_PTR && conn != NULL) (void)rpma_conn_delete(&conn);
}

static void device_section(const char* addr) {
  struct ibv_context* ctx = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
  struct rpma_peer* peer = NULL;
  if (ret == 0 && ctx != NULL) ret = rpma_peer_new(ctx, &peer);
  if (ret != 0 || peer == NULL) {
    check("device section", "aborted: no peer (ret=%s)", ret_name(ret));
    return;
  }

  /* ---- rpma_ep_listen with a real peer --------------------------------- */
  struct rpma_ep* ep = SENTINEL_PTR;
  ret = rpma_ep_listen(peer, NULL, PORT_LISTEN, &ep);
  check_ptr("ep_listen(peer, addr NULL, port, &ep)", ret, ep);
  ep = SENTINEL_PTR;
  ret = rpma_ep_listen(peer, addr, NULL, &ep);
  check_ptr("ep_listen(peer, ADDR, port NULL, &ep)", ret, ep);
  check_ret("ep_listen(peer, ADDR, port, NULL)", rpma_ep_listen(peer, addr, PORT_LISTEN, NULL));
  ep = SENTINEL_PTR;
  ret = rpma_ep_listen(peer, addr, PORT_LISTEN, &ep);
  check_ptr("ep_listen(peer, ADDR, port, &ep)", ret, ep);
  if (ret == 0) {
    struct rpma_ep* ep2 = SENTINEL_PTR;
    ret = rpma_ep_listen(peer, addr, PORT_LISTEN, &ep2);
    check_ptr("ep_listen(peer, ADDR, the same port again, &ep)", ret, ep2);
    if (ret == 0) (void)rpma_ep_shutdown(&ep2);

    int fd = SENTINEL_INT;
    ret = rpma_ep_get_fd(ep, &fd);
    check_fd("ep_get_fd(ep, &fd)", ret, fd);
    check_ret("ep_get_fd(ep, NULL)", rpma_ep_get_fd(ep, NULL));
    check_ret("ep_next_conn_req(ep, cfg NULL, NULL)", rpma_ep_next_conn_req(ep, NULL, NULL));
    struct rpma_conn_cfg* cfg = NULL;
    (void)rpma_conn_cfg_new(&cfg);
    check_ret("ep_next_conn_req(ep, cfg, NULL)", rpma_ep_next_conn_req(ep, cfg, NULL));
    (void)rpma_conn_cfg_delete(&cfg);

    ret = rpma_ep_shutdown(&ep);
    check_ptr("ep_shutdown(&ep)", ret, ep);
    ret = rpma_ep_shutdown(&ep);
    check_ptr("ep_shutdown(&ep) again (NULL now)", ret, ep);
  }

  /* ---- an outgoing request: private data and bad connects ---------------- */
  struct rpma_conn_req* req = new_req(peer, addr, "get_private_data");
  if (req != NULL) {
    check_ret("conn_req_get_private_data(req, NULL)", rpma_conn_req_get_private_data(req, NULL));
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    ret = rpma_conn_req_get_private_data(req, &pd);
    check_pdata("conn_req_get_private_data(outgoing req, &pdata)", ret, &pd);
    (void)rpma_conn_req_delete(&req);
  }
  char text[] = "compat";
  const struct rpma_conn_private_data null_ptr = {NULL, 5};
  const struct rpma_conn_private_data zero_len = {text, 0};
  const struct rpma_conn_private_data null_zero = {NULL, 0};
  const struct rpma_conn_private_data good = {text, sizeof text};
  bad_connect(peer, addr, "conn_req_connect(&req, pdata {NULL, 5}, &conn)", &null_ptr, 0);
  bad_connect(peer, addr, "conn_req_connect(&req, pdata {text, 0}, &conn)", &zero_len, 0);
  bad_connect(peer, addr, "conn_req_connect(&req, pdata {NULL, 0}, &conn)", &null_zero, 0);
  bad_connect(peer, addr, "conn_req_connect(&req, pdata NULL, NULL)", NULL, 1);
  bad_connect(peer, addr, "conn_req_connect(&req, pdata {text, 7}, NULL)", &good, 1);
  bad_connect(peer, addr, "conn_req_connect(&req, pdata {NULL, 5}, NULL)", &null_ptr, 1);

  /* ---- a connection to a port nobody listens on: its calls with NULLs ---- */
  req = new_req(peer, addr, "a connection");
  struct rpma_conn* conn = SENTINEL_PTR;
  if (req != NULL) {
    ret = rpma_conn_req_connect(&req, NULL, &conn);
    check("conn_req_connect(&req, pdata NULL, &conn) to a port nobody listens on",
          "ret=%s req=%s out=%s", ret_name(ret), ptr_state(req), ptr_state(conn));
    if (req != NULL) (void)rpma_conn_req_delete(&req);
  }
  if (conn != SENTINEL_PTR && conn != NULL) {
    check_ret("conn_get_event_fd(conn, NULL)", rpma_conn_get_event_fd(conn, NULL));
    check_ret("conn_next_event(conn, NULL)", rpma_conn_next_event(conn, NULL));
    check_ret("conn_get_private_data(conn, NULL)", rpma_conn_get_private_data(conn, NULL));
    struct rpma_conn_private_data pd = {SENTINEL_PTR, SENTINEL_BYTE};
    ret = rpma_conn_get_private_data(conn, &pd);
    check_pdata("conn_get_private_data(conn, &pdata) before any event", ret, &pd);
    check_ret("conn_apply_remote_peer_cfg(conn, NULL)",
              rpma_conn_apply_remote_peer_cfg(conn, NULL));
    struct rpma_peer_cfg* pcfg = NULL;
    (void)rpma_peer_cfg_new(&pcfg);
    (void)rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true);
    check_ret("conn_apply_remote_peer_cfg(conn, pcfg)",
              rpma_conn_apply_remote_peer_cfg(conn, pcfg));
    (void)rpma_peer_cfg_delete(&pcfg);
    check_ret("conn_get_qp_num(conn, NULL)", rpma_conn_get_qp_num(conn, NULL));
    check_ret("conn_get_cq(conn, NULL)", rpma_conn_get_cq(conn, NULL));
    check_ret("conn_get_rcq(conn, NULL)", rpma_conn_get_rcq(conn, NULL));
    check_ret("conn_get_compl_fd(conn, NULL)", rpma_conn_get_compl_fd(conn, NULL));
    struct rpma_cq* cq = SENTINEL_PTR;
    ret = rpma_conn_get_cq(conn, &cq);
    check_ptr("conn_get_cq(conn, &cq)", ret, cq);
    if (ret == 0 && cq != NULL && cq != SENTINEL_PTR)
      check_ret("cq_get_fd(cq, NULL)", rpma_cq_get_fd(cq, NULL));

    /* the answer of a port nobody listens on, waited for at most 10 s */
    int fd = -1;
    (void)rpma_conn_get_event_fd(conn, &fd);
    struct pollfd pfd = {fd, POLLIN, 0};
    if (fd >= 0 && poll(&pfd, 1, 10000) == 1) {
      int ev = SENTINEL_INT;
      ret = rpma_conn_next_event(conn, (enum rpma_conn_event*)&ev);
      check_event("conn_next_event(conn, &event) from a port nobody listens on", ret, ev);
    } else {
      check("conn_next_event(conn, &event) from a port nobody listens on", "no event in 10 s");
    }
    ret = rpma_conn_delete(&conn);
    check_ptr("conn_delete(&conn)", ret, conn);
    ret = rpma_conn_delete(&conn);
    check_ptr("conn_delete(&conn) again (NULL now)", ret, conn);
  }

  ret = rpma_peer_delete(&peer);
  check_ptr("peer_delete", ret, peer);
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
  null_objects();
  if (npos == 3)
    device_section(pos[0]);
  else
    check("device section", "skipped (no address given)");
  return compat_end("compat_lifecycle_args");
}
