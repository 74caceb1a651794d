/* Router test fixtures: seven unrelated model families (dense and MoE, generative, vision,
 * embeddings), backend descriptors built in code, a ledger and a policy. Shared by the router
 * unit tests.
 * The registry comes in through router/with_registry.h (its manifest bit names clash with the
 * capability keys). */
#ifndef QR_TEST_ROUTER_FIXTURE_H
#define QR_TEST_ROUTER_FIXTURE_H

#include <string.h>

#include "router/with_registry.h"

#include "router/router.h"

#define MF(id, aliases, btype, arts, model, caps)                                                  \
    "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"" id "\","           \
    "\"display_name\":\"" id "\",\"aliases\":[" aliases "],"                                       \
    "\"source\":{\"provider\":\"test\",\"reference\":\"" id "\",\"revision\":\"r1\"},"             \
    "\"backend\":{\"type\":\"" btype "\"},\"artifacts\":[" arts "],\"model\":{" model "},"         \
    "\"capabilities\":{" caps "},\"compatibility\":{\"min_runtime_version\":\"0.4.0\"},"           \
    "\"state\":{\"install\":\"available\",\"verification\":\"unverified\","                        \
    "\"lifecycle\":\"active\"},\"provenance\":{\"publisher\":\"tests\"}}"

#define CAPS(text, vision, embed, tools, thinking, extra)                                          \
    "\"text\":" text ",\"vision\":" vision ",\"audio\":false,\"embeddings\":" embed                \
    ",\"tools\":" tools ",\"thinking\":" thinking extra

/* clang-format off */
static const char *const FIXTURE_MANIFESTS[] = {
    /* 1. llama, dense: GGUF with an Ollama tag, tools, no thinking */
    MF("llama3-8b", "\"llama3:8b\",\"meta/llama3\"", "llama.cpp",
       "{\"uri\":\"models:llama3-8b.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\","
       "\"role\":\"inference\",\"ollama\":{\"tag\":\"llama3:8b\"}}",
       "\"architecture\":\"llama\",\"parameter_class\":\"8b\",\"quantization\":\"q4_k_m\","
       "\"context_window\":8192,\"architecture_class\":\"dense\","
       "\"architecture_contract\":{\"architecture\":\"llama\",\"ffn\":\"dense\","
       "\"context_length\":8192}",
       CAPS("true", "false", "false", "true", "false", ",\"structured_output\":true")),
    /* 2. qwen3moe, MoE: GGUF, Ollama tag artifact, HF repo for vLLM; thinking, tool streaming */
    MF("qwen3-30b-a3b", "\"qwen3:30b-a3b\"", "llama.cpp",
       "{\"uri\":\"models:qwen3-30b-a3b.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\","
       "\"role\":\"inference\"},"
       "{\"uri\":\"ollama:qwen3:30b-a3b\",\"backend\":\"ollama-adapter\"},"
       "{\"uri\":\"hf:Qwen/Qwen3-30B-A3B\",\"backend\":\"vllm\",\"format\":\"safetensors\","
       "\"huggingface\":{\"repo\":\"Qwen/Qwen3-30B-A3B\"}},"
       "{\"uri\":\"models:qwen3-draft.gguf\",\"backend\":\"llama.cpp\",\"role\":\"draft\"}",
       "\"architecture\":\"qwen3moe\",\"parameter_class\":\"30b-a3b\","
       "\"quantization\":\"q4_k_m\",\"context_window\":32768,\"architecture_class\":\"moe\","
       "\"experts\":{\"total\":128,\"active\":8,\"shared\":0},"
       "\"context_policy\":{\"native_max\":32768,\"backend_managed\":true,"
       "\"override_supported\":true,\"override_verified\":false},"
       "\"architecture_contract\":{\"architecture\":\"qwen3moe\",\"ffn\":\"moe\","
       "\"expert_count\":128,\"expert_used_count\":8,\"context_length\":40960}",
       CAPS("true", "false", "false", "true", "true",
            ",\"tool_streaming\":true,\"reasoning_control\":true,\"structured_output\":true")),
    /* 3. mistral3, dense, vision */
    MF("mistral-small-3", "\"mistral3:24b\"", "llama.cpp",
       "{\"uri\":\"models:mistral3.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\"}",
       "\"architecture\":\"mistral3\",\"parameter_class\":\"24b\",\"quantization\":\"q4_k_m\","
       "\"context_window\":16384,\"architecture_class\":\"dense\"",
       CAPS("true", "true", "false", "true", "false", "")),
    /* 4. deepseek2, MoE proven by the file only (no declared class) */
    MF("deepseek-v2-lite", "\"deepseek-v2:16b\"", "llama.cpp",
       "{\"uri\":\"models:dsv2-lite.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\"}",
       "\"architecture\":\"deepseek2\",\"parameter_class\":\"16b\",\"quantization\":\"q4_0\","
       "\"context_window\":4096,"
       "\"architecture_contract\":{\"architecture\":\"deepseek2\",\"ffn\":\"moe\","
       "\"expert_count\":64,\"expert_used_count\":6,\"expert_shared_count\":2}",
       CAPS("true", "false", "false", "false", "false", "")),
    /* 5. phi3, architecture class not stated anywhere (fail-closed cases) */
    MF("phi3-mini", "\"phi3:mini\"", "llama.cpp",
       "{\"uri\":\"models:phi3-mini.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\"}",
       "\"architecture\":\"phi3\",\"parameter_class\":\"mini\",\"quantization\":\"q8_0\","
       "\"context_window\":4096",
       CAPS("true", "false", "false", "false", "false", "")),
    /* 6. bert, encoder: embeddings only */
    MF("bert-embed", "\"bert:embed\"", "llama.cpp",
       "{\"uri\":\"models:bert.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\","
       "\"role\":\"embedding\"}",
       "\"architecture\":\"bert\",\"parameter_class\":\"tiny\",\"quantization\":\"f16\","
       "\"context_window\":512,\"architecture_class\":\"dense\","
       "\"architecture_contract\":{\"architecture\":\"bert\",\"ffn\":\"dense\",\"pooling\":\"mean\","
       "\"attention\":{\"causal\":false}}",
       CAPS("false", "false", "true", "false", "false", "")),
    /* 7. granite, dense, served by an OpenAI-compatible server by id */
    MF("granite-3-8b", "\"granite3:8b\"", "external",
       "{\"uri\":\"openai:oa1/granite-3.0-8b-instruct\"}",
       "\"architecture\":\"granite\",\"parameter_class\":\"8b\",\"quantization\":\"bf16\","
       "\"context_window\":4096,\"architecture_class\":\"dense\"",
       CAPS("true", "false", "false", "true", "false", "")),
};

/* A tested Ollama build (the alternative), and a block: tool calling of qwen3moe on llama.cpp
 * b11669 is known bad, with Ollama as the tested alternative. */
static const char FIXTURE_LEDGER[] =
    "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\",\"entries\":["
    "{\"id\":\"ollama-0.12.3\",\"project\":\"Ollama\",\"backend_kind\":\"ollama-adapter\","
    "\"source_url\":\"https://example.org/ollama\",\"status\":\"tested\","
    "\"tested_ref\":\"v0.12.3\",\"engine_versions\":[\"0.12.3\"],"
    "\"observed_at\":\"2026-11-01T00:00:00Z\",\"license_ref\":\"MIT\"}],"
    "\"blocks\":[{\"id\":\"lc-qwen3-tools-broken\",\"backend_kind\":\"llama.cpp\","
    "\"engine_versions\":[\"b11669\"],\"model_family\":\"qwen3moe\",\"hardware_class\":\"*\","
    "\"capability\":\"tools.calling\",\"reason\":\"tool call ids are lost\","
    "\"sources\":[\"test\"],\"alternative\":{\"backend_kind\":\"ollama-adapter\","
    "\"engine_versions\":[\"0.12.3\"]}}]}";

/* qwen3moe on Ollama: temperature known-good, generation/context controls unverified. */
static const char FIXTURE_POLICY[] =
    "{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"id\":\"qwen3-ollama-min\","
    "\"model_family\":\"qwen3moe\",\"variants\":[\"*\"],\"backend_kind\":\"ollama-adapter\","
    "\"hardware_class\":\"*\",\"context\":{\"backend_managed\":true,"
    "\"override_supported\":true,\"override_verified\":false},\"parameters\":["
    "{\"name\":\"temperature\",\"class\":\"known-good\",\"value\":0.6},"
    "{\"name\":\"num_ctx\",\"class\":\"unverified\"},"
    "{\"name\":\"num_predict\",\"class\":\"unverified\"},"
    "{\"name\":\"seed\",\"class\":\"unverified\"}],"
    "\"validation\":{\"observed_date\":\"2026-11-30\",\"sources\":[\"test\"]}}";
/* clang-format on */

/* A descriptor: model-bearing keys conditional (the model decides), the rest supported. */
static inline void fixture_desc(struct qr_cap_descriptor *d, const char *id,
                                enum qr_cap_backend_kind kind)
{
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "%s", id);
    d->kind = kind;
    snprintf(d->adapter_version, sizeof d->adapter_version, "0.4.0");
    d->execution_mode = QR_CAP_EXEC_EXTERNAL;
    d->state = QR_CAP_BACKEND_READY;
    for (int k = 0; k < QR_CAP__COUNT; k++)
        d->caps[k] =
            qr_cap_info((enum qr_cap_key) k)->model_side ? QR_CAP_CONDITIONAL : QR_CAP_SUPPORTED;
    d->caps[QR_CAP_QUANT_FORMATS] = QR_CAP_UNKNOWN;
    d->caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_UNSUPPORTED;
    d->backend_managed = true;
}

#endif
