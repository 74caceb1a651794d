/* The `backends` list of the config file (config.c's helper; docs/CONFIGURATION.md "Backends"):
 * parsing and validation of its entries, the single backend built from the older settings when
 * there is no list, and its rendering for check-config. Internal to core/config.c. */
#ifndef QR_CORE_CONFIG_BACKENDS_H
#define QR_CORE_CONFIG_BACKENDS_H

#include <stdbool.h>

#include <yyjson.h>

#include "core/config.h"

/* Parse the file's "backends" value (who: "<file>: key 'backends'") into cfg->backends. */
enum qr_err qr_cfg_backends_parse(struct qr_config *cfg, yyjson_val *arr, const char *who,
                                  struct qr_diag *diag);

/* After every source was read: build the single backend when there is no list; otherwise check
 * the list against the other settings, give Ollama entries without a url the ollama_url setting,
 * and read each api_key_env from envp (an unset variable is an error). */
enum qr_err qr_cfg_backends_finish(struct qr_config *cfg, char **envp, struct qr_diag *diag);

void qr_cfg_backends_free(struct qr_config *cfg);

/* Same backends, same order, same values (reload: the list needs a restart). */
bool qr_cfg_backends_equal(const struct qr_config *a, const struct qr_config *b);

/* check-config: "backends" array on root (JSON), or one line per backend (text); no secrets. */
void qr_cfg_backends_print_json(const struct qr_config *cfg, yyjson_mut_doc *doc,
                                yyjson_mut_val *root);
void qr_cfg_backends_print_text(const struct qr_config *cfg, FILE *out);

#endif
