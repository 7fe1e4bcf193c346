/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_conn_cfg.c -- every rpma_conn_cfg_* function: argument errors (with
 * out-parameter sentinels), defaults and round trips. No device needed.
 */
#include "compat.h"

/* ---- getters: the value read, or "untouched" ---------------------------- */

static void get_timeout(const char* what, const struct rpma_conn_cfg* cfg) {
  char name[160];
  snprintf(name, sizeof name, "conn_cfg_get_timeout %s", what);
  int v = SENTINEL_INT;
  int ret = rpma_conn_cfg_get_timeout(cfg, &v);
  check_int(name, ret, v);
}

typedef int (*get_u32_fn)(const struct rpma_conn_cfg*, uint32_t*);
typedef int (*set_u32_fn)(struct rpma_conn_cfg*, uint32_t);

struct size_field {
  const char* name;
  get_u32_fn get;
  set_u32_fn set;
};

static const struct size_field size_fields[] = {
    {"cq_size", rpma_conn_cfg_get_cq_size, rpma_conn_cfg_set_cq_size},
    {"rcq_size", rpma_conn_cfg_get_rcq_size, rpma_conn_cfg_set_rcq_size},
    {"sq_size", rpma_conn_cfg_get_sq_size, rpma_conn_cfg_set_sq_size},
    {"rq_size", rpma_conn_cfg_get_rq_size, rpma_conn_cfg_set_rq_size},
};
#define N_SIZE_FIELDS (sizeof size_fields / sizeof size_fields[0])

static void get_size(const struct size_field* f, const char* what,
                     const struct rpma_conn_cfg* cfg) {
  char name[160];
  snprintf(name, sizeof name, "conn_cfg_get_%s %s", f->name, what);
  uint32_t v = SENTINEL_U32;
  int ret = f->get(cfg, &v);
  check_u32(name, ret, v);
}

static void get_channel(const char* what, const struct rpma_conn_cfg* cfg) {
  char name[160];
  snprintf(name, sizeof name, "conn_cfg_get_compl_channel %s", what);
  unsigned char raw[sizeof(bool)];
  memset(raw, SENTINEL_BYTE, sizeof raw);
  int ret = rpma_conn_cfg_get_compl_channel(cfg, (bool*)(void*)raw);
  check_bool_byte(name, ret, raw[0]);
}

static void get_srq(const char* what, const struct rpma_conn_cfg* cfg, const void* expected) {
  char name[160];
  snprintf(name, sizeof name, "conn_cfg_get_srq %s", what);
  struct rpma_srq* srq = SENTINEL_PTR;
  int ret = rpma_conn_cfg_get_srq(cfg, &srq);
  if (srq == SENTINEL_PTR || srq == NULL || expected == NULL)
    check_ptr(name, ret, srq);
  else
    check(name, "ret=%s out=%s", ret_name(ret),
          (const void*)srq == expected ? "the pointer set" : "another pointer");
}

static void get_all(const char* what, const struct rpma_conn_cfg* cfg) {
  get_timeout(what, cfg);
  for (size_t i = 0; i < N_SIZE_FIELDS; ++i) get_size(&size_fields[i], what, cfg);
  get_channel(what, cfg);
  get_srq(what, cfg, NULL);
}

int main(void) {
  /* ---- new / delete argument errors ------------------------------------ */
  check_ret("conn_cfg_new(NULL)", rpma_conn_cfg_new(NULL));
  check_ret("conn_cfg_delete(NULL)", rpma_conn_cfg_delete(NULL));
  struct rpma_conn_cfg* none = NULL;
  int ret = rpma_conn_cfg_delete(&none);
  check_ptr("conn_cfg_delete(&NULL)", ret, none);

  struct rpma_conn_cfg* cfg = SENTINEL_PTR;
  ret = rpma_conn_cfg_new(&cfg);
  check_ptr("conn_cfg_new", ret, cfg);
  if (ret != 0) return compat_end("compat_conn_cfg");

  /* ---- defaults -------------------------------------------------------- */
  get_all("default", cfg);

  /* ---- NULL cfg, NULL out-pointer, both NULL ---------------------------- */
  get_all("cfg=NULL", NULL);
  check_ret("conn_cfg_get_timeout(cfg, NULL)", rpma_conn_cfg_get_timeout(cfg, NULL));
  check_ret("conn_cfg_get_timeout(NULL, NULL)", rpma_conn_cfg_get_timeout(NULL, NULL));
  for (size_t i = 0; i < N_SIZE_FIELDS; ++i) {
    char name[160];
    snprintf(name, sizeof name, "conn_cfg_get_%s(cfg, NULL)", size_fields[i].name);
    check_ret(name, size_fields[i].get(cfg, NULL));
    snprintf(name, sizeof name, "conn_cfg_get_%s(NULL, NULL)", size_fields[i].name);
    check_ret(name, size_fields[i].get(NULL, NULL));
    snprintf(name, sizeof name, "conn_cfg_set_%s(NULL, 5)", size_fields[i].name);
    check_ret(name, size_fields[i].set(NULL, 5));
  }
  check_ret("conn_cfg_get_compl_channel(cfg, NULL)", rpma_conn_cfg_get_compl_channel(cfg, NULL));
  check_ret("conn_cfg_get_compl_channel(NULL, NULL)", rpma_conn_cfg_get_compl_channel(NULL, NULL));
  check_ret("conn_cfg_get_srq(cfg, NULL)", rpma_conn_cfg_get_srq(cfg, NULL));
  check_ret("conn_cfg_get_srq(NULL, NULL)", rpma_conn_cfg_get_srq(NULL, NULL));
  check_ret("conn_cfg_set_timeout(NULL, 5)", rpma_conn_cfg_set_timeout(NULL, 5));
  check_ret("conn_cfg_set_timeout(NULL, -1)", rpma_conn_cfg_set_timeout(NULL, -1));
  check_ret("conn_cfg_set_compl_channel(NULL, true)", rpma_conn_cfg_set_compl_channel(NULL, true));
  check_ret("conn_cfg_set_srq(NULL, NULL)", rpma_conn_cfg_set_srq(NULL, NULL));
  /* the defaults are still there after all the failed calls */
  get_all("after argument errors", cfg);

  /* ---- timeout round trips; negative values are rejected --------------- */
  const int timeouts[] = {0, 1, 7, 1000, 123456, INT_MAX, -1, -1000, INT_MIN};
  for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; ++i) {
    /* start from a known value, so a rejected set shows as "unchanged" */
    (void)rpma_conn_cfg_set_timeout(cfg, 4321);
    char name[160];
    snprintf(name, sizeof name, "conn_cfg_set_timeout(cfg, %d)", timeouts[i]);
    check_ret(name, rpma_conn_cfg_set_timeout(cfg, timeouts[i]));
    snprintf(name, sizeof name, "after set %d (was 4321)", timeouts[i]);
    get_timeout(name, cfg);
  }

  /* ---- sizes: any uint32_t is accepted and read back ------------------- */
  const uint32_t sizes[] = {0, 1, 10, 4096, 65536, UINT32_MAX - 1, UINT32_MAX};
  for (size_t f = 0; f < N_SIZE_FIELDS; ++f) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
      char name[160];
      snprintf(name, sizeof name, "conn_cfg_set_%s(cfg, %u)", size_fields[f].name, sizes[i]);
      check_ret(name, size_fields[f].set(cfg, sizes[i]));
      snprintf(name, sizeof name, "after set %u", sizes[i]);
      get_size(&size_fields[f], name, cfg);
    }
  }
  /* each setter changes its own field only */
  (void)rpma_conn_cfg_set_cq_size(cfg, 11);
  (void)rpma_conn_cfg_set_rcq_size(cfg, 12);
  (void)rpma_conn_cfg_set_sq_size(cfg, 13);
  (void)rpma_conn_cfg_set_rq_size(cfg, 14);
  (void)rpma_conn_cfg_set_timeout(cfg, 15);
  get_all("after setting each field to its own value", cfg);

  /* ---- completion channel --------------------------------------------- */
  check_ret("conn_cfg_set_compl_channel(cfg, true)", rpma_conn_cfg_set_compl_channel(cfg, true));
  get_channel("after set true", cfg);
  check_ret("conn_cfg_set_compl_channel(cfg, true) again",
            rpma_conn_cfg_set_compl_channel(cfg, true));
  get_channel("after set true again", cfg);
  check_ret("conn_cfg_set_compl_channel(cfg, false)", rpma_conn_cfg_set_compl_channel(cfg, false));
  get_channel("after set false", cfg);

  /*
   * ---- SRQ ---------------------------------------------------------------
   * No SRQ object can be made without the data-path API, so a stand-in is
   * set: zeroed storage that a library only stores (and would not crash on
   * if it read it). The cfg is not used for a connection afterwards.
   */
  static _Alignas(64) unsigned char fake_srq[4096];
  struct rpma_srq* srq = (struct rpma_srq*)(void*)fake_srq;
  check_ret("conn_cfg_set_srq(cfg, NULL)", rpma_conn_cfg_set_srq(cfg, NULL));
  get_srq("after set NULL", cfg, NULL);
  check_ret("conn_cfg_set_srq(cfg, srq)", rpma_conn_cfg_set_srq(cfg, srq));
  get_srq("after set srq", cfg, srq);
  get_size(&size_fields[1], "after set srq", cfg); /* rcq_size: unchanged by the SRQ */
  check_ret("conn_cfg_set_srq(cfg, NULL) after srq", rpma_conn_cfg_set_srq(cfg, NULL));
  get_srq("after set srq then NULL", cfg, srq);

  /* ---- two configurations are independent ------------------------------ */
  struct rpma_conn_cfg* other = SENTINEL_PTR;
  ret = rpma_conn_cfg_new(&other);
  check_ptr("conn_cfg_new second", ret, other);
  if (ret == 0) {
    check("conn_cfg_new second is another object", "%s", other != cfg ? "yes" : "no");
    get_all("second cfg (defaults)", other);
    ret = rpma_conn_cfg_delete(&other);
    check_ptr("conn_cfg_delete second", ret, other);
  }

  ret = rpma_conn_cfg_delete(&cfg);
  check_ptr("conn_cfg_delete", ret, cfg);
  ret = rpma_conn_cfg_delete(&cfg);
  check_ptr("conn_cfg_delete again (NULL now)", ret, cfg);
  return compat_end("compat_conn_cfg");
}
