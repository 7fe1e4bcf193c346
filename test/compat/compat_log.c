/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_log.c -- rpma_log_set_threshold, rpma_log_get_threshold and
 * rpma_log_set_function: defaults, every valid and some invalid thresholds
 * and levels, and that argument errors log nothing. No device needed.
 */
#include "log_capture.h"

static const char* threshold_label(int t) {
  static char buf[32];
  switch (t) {
    case RPMA_LOG_THRESHOLD: return "THRESHOLD";
    case RPMA_LOG_THRESHOLD_AUX: return "THRESHOLD_AUX";
    case RPMA_LOG_THRESHOLD_MAX: return "THRESHOLD_MAX";
    default: snprintf(buf, sizeof buf, "%d", t); return buf;
  }
}

static void get(const char* what, int threshold) {
  char name[160];
  snprintf(name, sizeof name, "log_get_threshold(%s) %s", threshold_label(threshold), what);
  enum rpma_log_level level = (enum rpma_log_level)SENTINEL_INT;
  int ret = rpma_log_get_threshold((enum rpma_log_threshold)threshold, &level);
  if ((int)level == SENTINEL_INT)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s value=%s", ret_name(ret), level_name(level));
}

static void set(int threshold, int level) {
  char name[160];
  snprintf(name, sizeof name, "log_set_threshold(%s, %s)", threshold_label(threshold),
           level_name(level));
  check_ret(name,
            rpma_log_set_threshold((enum rpma_log_threshold)threshold, (enum rpma_log_level)level));
}

int main(void) {
  /* defaults: nothing has touched the thresholds yet */
  get("default", RPMA_LOG_THRESHOLD);
  get("default", RPMA_LOG_THRESHOLD_AUX);

  /* unknown thresholds; a NULL level */
  get("unknown threshold", RPMA_LOG_THRESHOLD_MAX);
  get("unknown threshold", -1);
  get("unknown threshold", 3);
  get("unknown threshold", INT_MAX);
  check_ret("log_get_threshold(THRESHOLD, NULL)", rpma_log_get_threshold(RPMA_LOG_THRESHOLD, NULL));
  check_ret("log_get_threshold(THRESHOLD_AUX, NULL)",
            rpma_log_get_threshold(RPMA_LOG_THRESHOLD_AUX, NULL));
  check_ret("log_get_threshold(THRESHOLD_MAX, NULL)",
            rpma_log_get_threshold(RPMA_LOG_THRESHOLD_MAX, NULL));

  /* every valid level on both thresholds, read back */
  for (int t = RPMA_LOG_THRESHOLD; t <= RPMA_LOG_THRESHOLD_AUX; ++t) {
    for (int l = RPMA_LOG_DISABLED; l <= RPMA_LOG_LEVEL_DEBUG; ++l) {
      set(t, l);
      get("after set", t);
    }
  }

  /* the two thresholds are independent */
  set(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_ERROR);
  set(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_INFO);
  get("independent", RPMA_LOG_THRESHOLD);
  get("independent", RPMA_LOG_THRESHOLD_AUX);

  /* invalid levels and thresholds change nothing */
  set(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_NOTICE);
  set(RPMA_LOG_THRESHOLD_AUX, RPMA_LOG_LEVEL_FATAL);
  const int bad_levels[] = {-2, 6, 7, 100, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof bad_levels / sizeof bad_levels[0]; ++i) {
    set(RPMA_LOG_THRESHOLD, bad_levels[i]);
    set(RPMA_LOG_THRESHOLD_AUX, bad_levels[i]);
  }
  const int bad_thresholds[] = {RPMA_LOG_THRESHOLD_MAX, -1, 3, INT_MIN};
  for (size_t i = 0; i < sizeof bad_thresholds / sizeof bad_thresholds[0]; ++i) {
    set(bad_thresholds[i], RPMA_LOG_LEVEL_DEBUG);
    set(bad_thresholds[i], RPMA_LOG_DISABLED);
  }
  set(RPMA_LOG_THRESHOLD_MAX, 100);
  get("after invalid sets", RPMA_LOG_THRESHOLD);
  get("after invalid sets", RPMA_LOG_THRESHOLD_AUX);

  /* logging functions */
  check_ret("log_set_function(user)", rpma_log_set_function(capture_function));
  check_ret("log_set_function(user) again", rpma_log_set_function(capture_function));
  check_ret("log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION)",
            rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
  check_ret("log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION) again",
            rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
  check_ret("log_set_function(user) after default", rpma_log_set_function(capture_function));
  get("after set_function", RPMA_LOG_THRESHOLD);
  get("after set_function", RPMA_LOG_THRESHOLD_AUX);

  /* argument errors of every function log nothing, even at DEBUG */
  set(RPMA_LOG_THRESHOLD, RPMA_LOG_LEVEL_DEBUG);
  capture_reset();
  struct ibv_context* ctx = NULL;
  struct rpma_peer* peer = NULL;
  struct rpma_conn_req* req = NULL;
  int i32 = 0;
  uint32_t u32 = 0;
  bool b = false;
  struct rpma_srq* srq = NULL;
  (void)rpma_conn_cfg_new(NULL);
  (void)rpma_conn_cfg_delete(NULL);
  (void)rpma_conn_cfg_set_timeout(NULL, 1);
  (void)rpma_conn_cfg_get_timeout(NULL, &i32);
  (void)rpma_conn_cfg_set_cq_size(NULL, 1);
  (void)rpma_conn_cfg_get_cq_size(NULL, &u32);
  (void)rpma_conn_cfg_set_rcq_size(NULL, 1);
  (void)rpma_conn_cfg_get_rcq_size(NULL, &u32);
  (void)rpma_conn_cfg_set_sq_size(NULL, 1);
  (void)rpma_conn_cfg_get_sq_size(NULL, &u32);
  (void)rpma_conn_cfg_set_rq_size(NULL, 1);
  (void)rpma_conn_cfg_get_rq_size(NULL, &u32);
  (void)rpma_conn_cfg_set_compl_channel(NULL, true);
  (void)rpma_conn_cfg_get_compl_channel(NULL, &b);
  (void)rpma_conn_cfg_set_srq(NULL, NULL);
  (void)rpma_conn_cfg_get_srq(NULL, &srq);
  (void)rpma_utils_get_ibv_context(NULL, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
  (void)rpma_utils_get_ibv_context("127.0.0.1", RPMA_UTIL_IBV_CONTEXT_LOCAL, NULL);
  (void)rpma_utils_get_ibv_context("127.0.0.1", (enum rpma_util_ibv_context_type)7, &ctx);
  (void)rpma_peer_new(NULL, &peer);
  (void)rpma_peer_delete(NULL);
  (void)rpma_conn_req_new(NULL, "127.0.0.1", "7204", NULL, &req);
  (void)rpma_conn_req_delete(NULL);
  (void)rpma_log_set_threshold(RPMA_LOG_THRESHOLD_MAX, RPMA_LOG_LEVEL_DEBUG);
  (void)rpma_log_get_threshold(RPMA_LOG_THRESHOLD, NULL);
  check("log calls for argument errors (threshold DEBUG)", "%s", capture_levels());

  check_ret("log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION) restore",
            rpma_log_set_function(RPMA_LOG_USE_DEFAULT_FUNCTION));
  return compat_end("compat_log");
}
