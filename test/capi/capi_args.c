/*
 * capi_args.c -- every argument error of every function declared in
 * <librpma.h>, checked from a C11 program the way a librpma 1.3 user calls
 * them: the return value, and that a failed call writes no out-parameter.
 * None of these calls may reach a provider. Exit status 0 = all checks passed.
 */
#include <librpma.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int checks_passed;
static int checks_failed;

static void check(int ok, const char* what, int line) {
  if (ok) {
    ++checks_passed;
  } else {
    ++checks_failed;
    fprintf(stderr, "capi_args.c:%d: check failed: %s\n", line, what);
  }
}

#define CHECK(cond) check((cond) ? 1 : 0, #cond, __LINE__)
#define CHECK_RET(call, expected) check_ret((call), (expected), #call, __LINE__)
#define CHECK_STR(call, expected) check_str((call), (expected), #call, __LINE__)

static void check_ret(int got, int expected, const char* what, int line) {
  if (got == expected) {
    ++checks_passed;
  } else {
    ++checks_failed;
    fprintf(stderr, "capi_args.c:%d: %s returned %d (%s), expected %d (%s)\n", line, what, got,
            rpma_err_2str(got), expected, rpma_err_2str(expected));
  }
}

static void check_str(const char* got, const char* expected, const char* what, int line) {
  if (got != NULL && strcmp(got, expected) == 0) {
    ++checks_passed;
  } else {
    ++checks_failed;
    fprintf(stderr, "capi_args.c:%d: %s returned \"%s\", expected \"%s\"\n", line, what,
            got ? got : "(null)", expected);
  }
}

/*
 * Non-NULL addresses of the right types that are never dereferenced: each is
 * passed only where another argument is NULL, and librpma checks every NULL
 * before it touches anything.
 */
static max_align_t dummy_storage[4];
#define DUMMY_CTX ((struct ibv_context*)&dummy_storage[0])
#define DUMMY_PEER ((struct rpma_peer*)&dummy_storage[1])
#define DUMMY_SRQ ((struct rpma_srq*)&dummy_storage[2])
#define SENTINEL ((void*)&dummy_storage[3])

static void user_log_function(enum rpma_log_level level, const char* file_name, const int line_no,
                              const char* function_name, const char* message_format, ...) {
  (void)level;
  (void)file_name;
  (void)line_no;
  (void)function_name;
  (void)message_format;
}

static void check_utils(void) {
  struct ibv_context* ctx = (struct ibv_context*)SENTINEL;

  CHECK_RET(rpma_utils_get_ibv_context(NULL, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx), RPMA_E_INVAL);
  CHECK(ctx == (struct ibv_context*)SENTINEL);
  CHECK_RET(rpma_utils_get_ibv_context(NULL, RPMA_UTIL_IBV_CONTEXT_REMOTE, &ctx), RPMA_E_INVAL);
  CHECK(ctx == (struct ibv_context*)SENTINEL);
  CHECK_RET(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, NULL),
            RPMA_E_INVAL);
  CHECK_RET(rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_REMOTE, NULL),
            RPMA_E_INVAL);
  CHECK_RET(rpma_utils_get_ibv_context(NULL, RPMA_UTIL_IBV_CONTEXT_LOCAL, NULL), RPMA_E_INVAL);

  /* an unknown type is rejected before any lookup */
  const int unknown_types[] = {2, 7, -1, 1000};
  for (size_t i = 0; i < sizeof(unknown_types) / sizeof(unknown_types[0]); ++i) {
    enum rpma_util_ibv_context_type type = (enum rpma_util_ibv_context_type)unknown_types[i];
    CHECK_RET(rpma_utils_get_ibv_context("127.0.0.1", type, &ctx), RPMA_E_INVAL);
    CHECK(ctx == (struct ibv_context*)SENTINEL);
  }

  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_UNDEFINED), "Undefined connection event");
  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_ESTABLISHED), "Connection established");
  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_CLOSED), "Connection closed");
  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_LOST), "Connection lost");
  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_REJECTED), "Connection rejected");
  CHECK_STR(rpma_utils_conn_event_2str(RPMA_CONN_UNREACHABLE), "Connection unreachable");
  const int unknown_events[] = {-2, 5, 100, -100000};
  for (size_t i = 0; i < sizeof(unknown_events) / sizeof(unknown_events[0]); ++i)
    CHECK_STR(rpma_utils_conn_event_2str((enum rpma_conn_event)unknown_events[i]),
              "Unsupported connection event");
}

static void check_peer(void) {
  struct rpma_peer* peer = (struct rpma_peer*)SENTINEL;

  CHECK_RET(rpma_peer_new(NULL, &peer), RPMA_E_INVAL);
  CHECK(peer == (struct rpma_peer*)SENTINEL);
  CHECK_RET(rpma_peer_new(DUMMY_CTX, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_peer_new(NULL, NULL), RPMA_E_INVAL);

  CHECK_RET(rpma_peer_delete(NULL), RPMA_E_INVAL);
  peer = NULL;
  CHECK_RET(rpma_peer_delete(&peer), 0);
  CHECK(peer == NULL);
}

static void check_conn_req(void) {
  struct rpma_conn_req* req = (struct rpma_conn_req*)SENTINEL;
  struct rpma_conn_cfg* cfg = NULL;

  CHECK_RET(rpma_conn_cfg_new(&cfg), 0);

  CHECK_RET(rpma_conn_req_new(NULL, "127.0.0.1", "7204", NULL, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(NULL, "127.0.0.1", "7204", cfg, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, NULL, "7204", NULL, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, NULL, "7204", cfg, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, "127.0.0.1", NULL, NULL, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, "127.0.0.1", NULL, cfg, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, "127.0.0.1", "7204", NULL, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_req_new(DUMMY_PEER, "127.0.0.1", "7204", cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_req_new(NULL, NULL, NULL, NULL, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_req_new(NULL, NULL, NULL, NULL, &req), RPMA_E_INVAL);
  CHECK(req == (struct rpma_conn_req*)SENTINEL);

  CHECK_RET(rpma_conn_req_delete(NULL), RPMA_E_INVAL);
  req = NULL;
  CHECK_RET(rpma_conn_req_delete(&req), 0);
  CHECK(req == NULL);

  CHECK_RET(rpma_conn_cfg_delete(&cfg), 0);
}

static void check_conn_cfg(void) {
  struct rpma_conn_cfg* cfg = NULL;
  int timeout = 77;
  uint32_t size = 77;
  bool shared = true;
  struct rpma_srq* srq = (struct rpma_srq*)SENTINEL;

  /* new / delete */
  CHECK_RET(rpma_conn_cfg_new(NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_delete(NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_delete(&cfg), 0);
  CHECK(cfg == NULL);
  CHECK_RET(rpma_conn_cfg_new(&cfg), 0);
  CHECK(cfg != NULL);
  if (cfg == NULL) return;

  /* NULL cfg: every setter */
  CHECK_RET(rpma_conn_cfg_set_timeout(NULL, 1000), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_cq_size(NULL, 10), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_rcq_size(NULL, 10), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_sq_size(NULL, 10), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_rq_size(NULL, 10), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_compl_channel(NULL, true), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_srq(NULL, DUMMY_SRQ), RPMA_E_INVAL);

  /* NULL cfg: every getter, output untouched */
  CHECK_RET(rpma_conn_cfg_get_timeout(NULL, &timeout), RPMA_E_INVAL);
  CHECK(timeout == 77);
  CHECK_RET(rpma_conn_cfg_get_cq_size(NULL, &size), RPMA_E_INVAL);
  CHECK(size == 77);
  CHECK_RET(rpma_conn_cfg_get_rcq_size(NULL, &size), RPMA_E_INVAL);
  CHECK(size == 77);
  CHECK_RET(rpma_conn_cfg_get_sq_size(NULL, &size), RPMA_E_INVAL);
  CHECK(size == 77);
  CHECK_RET(rpma_conn_cfg_get_rq_size(NULL, &size), RPMA_E_INVAL);
  CHECK(size == 77);
  CHECK_RET(rpma_conn_cfg_get_compl_channel(NULL, &shared), RPMA_E_INVAL);
  CHECK(shared == true);
  CHECK_RET(rpma_conn_cfg_get_srq(NULL, &srq), RPMA_E_INVAL);
  CHECK(srq == (struct rpma_srq*)SENTINEL);

  /* NULL out-pointer: every getter */
  CHECK_RET(rpma_conn_cfg_get_timeout(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_cq_size(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_rcq_size(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_sq_size(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_rq_size(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_compl_channel(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_srq(cfg, NULL), RPMA_E_INVAL);

  /* invalid values: negative timeout, NULL srq; the stored value stays */
  CHECK_RET(rpma_conn_cfg_set_timeout(cfg, -1), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_set_timeout(cfg, -2147483647 - 1), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_timeout(cfg, &timeout), 0);
  CHECK(timeout == RPMA_DEFAULT_TIMEOUT_MS);
  CHECK_RET(rpma_conn_cfg_set_timeout(cfg, 0), 0); /* 0 is accepted */
  CHECK_RET(rpma_conn_cfg_get_timeout(cfg, &timeout), 0);
  CHECK(timeout == 0);
  CHECK_RET(rpma_conn_cfg_set_srq(cfg, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_conn_cfg_get_srq(cfg, &srq), 0);
  CHECK(srq == NULL);
  CHECK_RET(rpma_conn_cfg_set_srq(cfg, DUMMY_SRQ), 0);
  CHECK_RET(rpma_conn_cfg_get_srq(cfg, &srq), 0);
  CHECK(srq == DUMMY_SRQ);

  /* the defaults, and that zero and UINT32_MAX sizes are accepted */
  CHECK_RET(rpma_conn_cfg_delete(&cfg), 0);
  CHECK(cfg == NULL);
  CHECK_RET(rpma_conn_cfg_new(&cfg), 0);
  if (cfg == NULL) return;
  CHECK_RET(rpma_conn_cfg_get_cq_size(cfg, &size), 0);
  CHECK(size == 10);
  CHECK_RET(rpma_conn_cfg_get_rcq_size(cfg, &size), 0);
  CHECK(size == 0);
  CHECK_RET(rpma_conn_cfg_get_sq_size(cfg, &size), 0);
  CHECK(size == 10);
  CHECK_RET(rpma_conn_cfg_get_rq_size(cfg, &size), 0);
  CHECK(size == 10);
  CHECK_RET(rpma_conn_cfg_get_compl_channel(cfg, &shared), 0);
  CHECK(shared == false);
  CHECK_RET(rpma_conn_cfg_set_cq_size(cfg, 0), 0);
  CHECK_RET(rpma_conn_cfg_set_rcq_size(cfg, UINT32_MAX), 0);
  CHECK_RET(rpma_conn_cfg_get_rcq_size(cfg, &size), 0);
  CHECK(size == UINT32_MAX);

  CHECK_RET(rpma_conn_cfg_delete(&cfg), 0);
  CHECK(cfg == NULL);
  CHECK_RET(rpma_conn_cfg_delete(&cfg), 0); /* a second delete is harmless */
}

static void check_errors(void) {
  CHECK_STR(rpma_err_2str(0), "Success");
  CHECK_STR(rpma_err_2str(RPMA_E_UNKNOWN), "Unknown error");
  CHECK_STR(rpma_err_2str(RPMA_E_NOSUPP), "Not supported");
  CHECK_STR(rpma_err_2str(RPMA_E_PROVIDER), "Provider error occurred");
  CHECK_STR(rpma_err_2str(RPMA_E_NOMEM), "Out of memory");
  CHECK_STR(rpma_err_2str(RPMA_E_INVAL), "Invalid argument");
  CHECK_STR(rpma_err_2str(RPMA_E_NO_COMPLETION), "No next completion available");
  CHECK_STR(rpma_err_2str(RPMA_E_NO_EVENT), "No next event available");
  CHECK_STR(rpma_err_2str(RPMA_E_AGAIN), "Temporary error, try again");
  CHECK_STR(rpma_err_2str(RPMA_E_SHARED_CHANNEL), "Completion channel is shared");
  CHECK_STR(rpma_err_2str(RPMA_E_NOT_SHARED_CHNL), "Completion channel is not shared");
  CHECK_STR(rpma_err_2str(1), "Unknown error");
  CHECK_STR(rpma_err_2str(-1), "Unknown error");
  CHECK_STR(rpma_err_2str(-100010), "Unknown error");
}

static void check_log(void) {
  enum rpma_log_level primary = RPMA_LOG_DISABLED;
  enum rpma_log_level aux = RPMA_LOG_DISABLED;
  enum rpma_log_level level = (enum rpma_log_level)77;

  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &primary), 0);
  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &aux), 0);
#ifdef NDEBUG
  CHECK(primary == RPMA_LOG_LEVEL_WARNING);
  CHECK(aux == RPMA_LOG_DISABLED);
#else
  CHECK(primary == RPMA_LOG_LEVEL_DEBUG);
  CHECK(aux == RPMA_LOG_LEVEL_WARNING);
#endif

  /* get: unknown threshold, NULL level; the output stays */
  const int bad_thresholds[] = {RPMA_LOG_THRESHOLD_MAX, 3, -1, 100};
  for (size_t i = 0; i < sizeof(bad_thresholds) / sizeof(bad_thresholds[0]); ++i) {
    enum rpma_log_threshold t = (enum rpma_log_threshold)bad_thresholds[i];
    CHECK_RET(rpma_log_get_threshold(t, &level), RPMA_E_INVAL);
    CHECK(level == (enum rpma_log_level)77);
    CHECK_RET(rpma_log_get_threshold(t, NULL), RPMA_E_INVAL);
    CHECK_RET(rpma_log_set_threshold(t, RPMA_LOG_LEVEL_DEBUG), RPMA_E_INVAL);
  }
  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, NULL), RPMA_E_INVAL);
  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, NULL), RPMA_E_INVAL);

  /* set: level outside [DISABLED, DEBUG]; the thresholds stay */
  const int bad_levels[] = {-2, RPMA_LOG_LEVEL_DEBUG + 1, 100, -100};
  for (size_t i = 0; i < sizeof(bad_levels) / sizeof(bad_levels[0]); ++i) {
    enum rpma_log_level l = (enum rpma_log_level)bad_levels[i];
    CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, l), RPMA_E_INVAL);
    CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, l), RPMA_E_INVAL);
  }
  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
  CHECK(level == primary);
  CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &level), 0);
  CHECK(level == aux);

  /* every valid level, both thresholds */
  for (int l = RPMA_LOG_DISABLED; l <= RPMA_LOG_LEVEL_DEBUG; ++l) {
    CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, (enum rpma_log_level)l), 0);
    CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD, &level), 0);
    CHECK(level == (enum rpma_log_level)l);
    CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, (enum rpma_log_level)l), 0);
    CHECK_RET(rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, &level), 0);
    CHECK(level == (enum rpma_log_level)l);
  }
  CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD, primary), 0);
  CHECK_RET(rpma_log_set_threshold(RPMA_LOG_THRESHOLD_AUX, aux), 0);

  /* set_function: a user function, then the default again (always 0) */
  CHECK_RET(rpma_log_set_function(user_log_function), 0);
  CHECK_RET(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
  CHECK_RET(rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION), 0);
}

int main(void) {
  check_errors();
  check_log();
  check_conn_cfg();
  check_utils();
  check_peer();
  check_conn_req();

  if (checks_failed != 0) {
    fprintf(stderr, "capi_args: %d of %d checks failed\n", checks_failed,
            checks_failed + checks_passed);
    return 1;
  }
  printf("capi_args: %d checks passed\n", checks_passed);
  return 0;
}
