/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_peer_cfg.c -- every rpma_peer_cfg_* function: argument errors (with
 * out-parameter sentinels), the default, set/get round trips, the descriptor
 * (its size, the bytes written, and back). No device needed.
 */
#include "compat.h"

/* the direct_write_to_pmem flag read through its byte, or "untouched" */
static void get_direct(const char* what, const struct rpma_peer_cfg* pcfg) {
  char name[160];
  snprintf(name, sizeof name, "peer_cfg_get_direct_write_to_pmem %s", what);
  unsigned char raw[sizeof(bool)];
  memset(raw, SENTINEL_BYTE, sizeof raw);
  int ret = rpma_peer_cfg_get_direct_write_to_pmem(pcfg, (bool*)(void*)raw);
  check_bool_byte(name, ret, raw[0]);
}

/* rpma_peer_cfg_get_descriptor into a buffer of SENTINEL_BYTEs: the first bytes after it */
static void get_descriptor(const char* what, const struct rpma_peer_cfg* pcfg) {
  char name[160];
  snprintf(name, sizeof name, "peer_cfg_get_descriptor %s", what);
  unsigned char desc[4];
  memset(desc, SENTINEL_BYTE, sizeof desc);
  int ret = rpma_peer_cfg_get_descriptor(pcfg, desc);
  check(name, "ret=%s bytes=%02x %02x %02x %02x", ret_name(ret), desc[0], desc[1], desc[2],
        desc[3]);
}

/* rpma_peer_cfg_from_descriptor, then what the new cfg says; deletes it */
static void from_descriptor(const char* what, const void* desc, size_t size) {
  char name[160];
  snprintf(name, sizeof name, "peer_cfg_from_descriptor %s", what);
  struct rpma_peer_cfg* pcfg = SENTINEL_PTR;
  int ret = rpma_peer_cfg_from_descriptor(desc, size, &pcfg);
  check_ptr(name, ret, pcfg);
  if (ret != 0 || pcfg == NULL || pcfg == SENTINEL_PTR) return;
  char sub[200];
  snprintf(sub, sizeof sub, "from %s", what);
  get_direct(sub, pcfg);
  snprintf(sub, sizeof sub, "peer_cfg_delete after from_descriptor %s", what);
  ret = rpma_peer_cfg_delete(&pcfg);
  check_ptr(sub, ret, pcfg);
}

int main(void) {
  /* ---- new / delete argument errors ------------------------------------ */
  check_ret("peer_cfg_new(NULL)", rpma_peer_cfg_new(NULL));
  check_ret("peer_cfg_delete(NULL)", rpma_peer_cfg_delete(NULL));
  struct rpma_peer_cfg* none = NULL;
  int ret = rpma_peer_cfg_delete(&none);
  check_ptr("peer_cfg_delete(&NULL)", ret, none);

  struct rpma_peer_cfg* pcfg = SENTINEL_PTR;
  ret = rpma_peer_cfg_new(&pcfg);
  check_ptr("peer_cfg_new", ret, pcfg);
  if (ret != 0) return compat_end("compat_peer_cfg");

  /* ---- the default ----------------------------------------------------- */
  get_direct("default", pcfg);
  get_descriptor("default", pcfg);

  /* ---- NULL cfg, NULL out-pointer, both NULL ---------------------------- */
  get_direct("pcfg=NULL", NULL);
  check_ret("peer_cfg_get_direct_write_to_pmem(pcfg, NULL)",
            rpma_peer_cfg_get_direct_write_to_pmem(pcfg, NULL));
  check_ret("peer_cfg_get_direct_write_to_pmem(NULL, NULL)",
            rpma_peer_cfg_get_direct_write_to_pmem(NULL, NULL));
  check_ret("peer_cfg_set_direct_write_to_pmem(NULL, true)",
            rpma_peer_cfg_set_direct_write_to_pmem(NULL, true));
  check_ret("peer_cfg_set_direct_write_to_pmem(NULL, false)",
            rpma_peer_cfg_set_direct_write_to_pmem(NULL, false));

  size_t size = (size_t)SENTINEL_U32;
  ret = rpma_peer_cfg_get_descriptor_size(NULL, &size);
  check("peer_cfg_get_descriptor_size(NULL, &size)", "ret=%s out=%s", ret_name(ret),
        size == (size_t)SENTINEL_U32 ? "untouched" : "written");
  check_ret("peer_cfg_get_descriptor_size(pcfg, NULL)",
            rpma_peer_cfg_get_descriptor_size(pcfg, NULL));
  check_ret("peer_cfg_get_descriptor_size(NULL, NULL)",
            rpma_peer_cfg_get_descriptor_size(NULL, NULL));
  get_descriptor("(NULL, desc)", NULL);
  check_ret("peer_cfg_get_descriptor(pcfg, NULL)", rpma_peer_cfg_get_descriptor(pcfg, NULL));
  check_ret("peer_cfg_get_descriptor(NULL, NULL)", rpma_peer_cfg_get_descriptor(NULL, NULL));

  const unsigned char one[1] = {1};
  struct rpma_peer_cfg* out = SENTINEL_PTR;
  ret = rpma_peer_cfg_from_descriptor(NULL, 1, &out);
  check_ptr("peer_cfg_from_descriptor(NULL, 1, &pcfg)", ret, out);
  out = SENTINEL_PTR;
  ret = rpma_peer_cfg_from_descriptor(NULL, 0, &out);
  check_ptr("peer_cfg_from_descriptor(NULL, 0, &pcfg)", ret, out);
  check_ret("peer_cfg_from_descriptor(desc, 1, NULL)", rpma_peer_cfg_from_descriptor(one, 1, NULL));
  check_ret("peer_cfg_from_descriptor(desc, 0, NULL)", rpma_peer_cfg_from_descriptor(one, 0, NULL));
  check_ret("peer_cfg_from_descriptor(NULL, 1, NULL)",
            rpma_peer_cfg_from_descriptor(NULL, 1, NULL));
  from_descriptor("(desc {1}, size 0)", one, 0);

  /* the default is still there after all the failed calls */
  get_direct("after argument errors", pcfg);

  /* ---- set / get round trips ------------------------------------------- */
  check_ret("peer_cfg_set_direct_write_to_pmem(pcfg, true)",
            rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
  get_direct("after set true", pcfg);
  get_descriptor("after set true", pcfg);
  check_ret("peer_cfg_set_direct_write_to_pmem(pcfg, true) again",
            rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true));
  get_direct("after set true again", pcfg);
  check_ret("peer_cfg_set_direct_write_to_pmem(pcfg, false)",
            rpma_peer_cfg_set_direct_write_to_pmem(pcfg, false));
  get_direct("after set false", pcfg);
  get_descriptor("after set false", pcfg);

  /* ---- the descriptor size --------------------------------------------- */
  size = (size_t)SENTINEL_U32;
  ret = rpma_peer_cfg_get_descriptor_size(pcfg, &size);
  check("peer_cfg_get_descriptor_size(pcfg, &size)", "ret=%s value=%zu", ret_name(ret), size);
  (void)rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true);
  size = (size_t)SENTINEL_U32;
  ret = rpma_peer_cfg_get_descriptor_size(pcfg, &size);
  check("peer_cfg_get_descriptor_size(pcfg, &size) with true", "ret=%s value=%zu", ret_name(ret),
        size);

  /* ---- descriptors received ------------------------------------------- */
  const unsigned char zero[1] = {0};
  const unsigned char two[1] = {2};
  const unsigned char ff[1] = {0xff};
  const unsigned char long_one[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  const unsigned char long_zero[8] = {0, 1, 1, 1, 1, 1, 1, 1};
  from_descriptor("{0}, size 1", zero, 1);
  from_descriptor("{1}, size 1", one, 1);
  from_descriptor("{2}, size 1", two, 1);
  from_descriptor("{0xff}, size 1", ff, 1);
  from_descriptor("{1 0 0 0 0 0 0 0}, size 8", long_one, 8);
  from_descriptor("{0 1 1 1 1 1 1 1}, size 8", long_zero, 8);

  /* ---- round trip: get_descriptor -> from_descriptor ------------------- */
  const bool values[] = {true, false};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; ++i) {
    (void)rpma_peer_cfg_set_direct_write_to_pmem(pcfg, values[i]);
    unsigned char desc[16];
    memset(desc, 0, sizeof desc);
    size = 0;
    (void)rpma_peer_cfg_get_descriptor_size(pcfg, &size);
    ret = rpma_peer_cfg_get_descriptor(pcfg, desc);
    char what[64];
    snprintf(what, sizeof what, "round trip of %s", values[i] ? "true" : "false");
    if (ret != 0 || size == 0 || size > sizeof desc) {
      check(what, "ret=%s size=%zu", ret_name(ret), size);
      continue;
    }
    from_descriptor(what, desc, size);
  }

  /* ---- delete ---------------------------------------------------------- */
  ret = rpma_peer_cfg_delete(&pcfg);
  check_ptr("peer_cfg_delete", ret, pcfg);
  ret = rpma_peer_cfg_delete(&pcfg);
  check_ptr("peer_cfg_delete again (NULL now)", ret, pcfg);
  return compat_end("compat_peer_cfg");
}
