#include "tvmffi_jit/cache/remote/options.h"

#include <algorithm>

#include "cache/remote/http.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

void finish_remote_options(RemoteOptions& o) {
  if (std::any_of(o.urls.begin(), o.urls.end(), is_s3_url)) check_s3_settings(o.s3);
  load_remote_keys(o);
}

void load_remote_keys(RemoteOptions& o) {
  o.sign_key.reset();
  o.trusted_keys.clear();
  if (!o.sign_key_file.empty()) o.sign_key = read_secret_key(o.sign_key_file);
  for (const auto& f : o.trusted_key_files) o.trusted_keys.push_back(read_public_key(f));
}

}  // namespace tvmffi_jit::cache
