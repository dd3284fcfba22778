#include "tvmffi_jit/cache/remote/options.h"

#include <algorithm>

#include "cache/remote/http.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

RemoteOptions remote_options_from_environment(RemoteOptions o, bool command_line_read_only,
                                              const toolchain::EnvLookup& env) {
  if (o.urls.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE")) {
      for (const auto& part : util::split_any(*v, " \t\n"))
        if (!part.empty()) o.urls.push_back(part);
    }
  }
  o.read_only = command_line_read_only || toolchain::env_flag(env, "TVMFFI_JIT_REMOTE_READ_ONLY");
  if (auto ns = env("TVMFFI_JIT_REMOTE_NAMESPACE"); ns && o.key_namespace == "tvmffi-jit") o.key_namespace = *ns;
  o.first_byte_timeout_ms = static_cast<int>(
      toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT", o.first_byte_timeout_ms));
  o.transfer_timeout_ms =
      static_cast<int>(toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_TIMEOUT", o.transfer_timeout_ms));
  o.max_blob_bytes = toolchain::env_size(env, "TVMFFI_JIT_REMOTE_MAX_BLOB", o.max_blob_bytes);
  if (auto lib = env("TVMFFI_JIT_LIBCURL"); lib && !lib->empty()) o.libcurl = *lib;
  // AWS's variables, read only when an S3 remote will use them.
  if (std::any_of(o.urls.begin(), o.urls.end(), is_s3_url)) {
    auto var = [&env](const char* name) -> std::string { return env(name).value_or(""); };
    o.s3.endpoint_url = var("AWS_ENDPOINT_URL");
    if (std::string r = var("AWS_REGION"); !r.empty()) o.s3.region = r;
    else if (std::string d = var("AWS_DEFAULT_REGION"); !d.empty()) o.s3.region = d;
    o.s3.access_key_id = var("AWS_ACCESS_KEY_ID");
    o.s3.secret_access_key = var("AWS_SECRET_ACCESS_KEY");
    o.s3.session_token = var("AWS_SESSION_TOKEN");
    check_s3_settings(o.s3);
  }
  if (o.sign_key_file.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_SIGN_KEY")) o.sign_key_file = *v;
  }
  if (o.trusted_key_files.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_TRUSTED_KEYS")) {
      for (const auto& part : util::split_any(*v, ":"))
        if (!part.empty()) o.trusted_key_files.push_back(part);
    }
  }
  load_remote_keys(o);
  return o;
}

void load_remote_keys(RemoteOptions& o) {
  o.sign_key.reset();
  o.trusted_keys.clear();
  if (!o.sign_key_file.empty()) o.sign_key = read_secret_key(o.sign_key_file);
  for (const auto& f : o.trusted_key_files) o.trusted_keys.push_back(read_public_key(f));
}

std::optional<std::string> untrusted_reason(const RemoteOptions& options, const BlobEntry& record) {
  if (!options.requires_signature()) return std::nullopt;
  if (trusted_signer(options.trusted_keys, record)) return std::nullopt;
  if (record.signatures.empty()) return std::string("it is not signed");
  std::string names;
  for (const auto& s : record.signatures) names += (names.empty() ? "" : ", ") + s.signer;
  return "no trusted key verifies its signature (signed as " + names + ")";
}

}  // namespace tvmffi_jit::cache
