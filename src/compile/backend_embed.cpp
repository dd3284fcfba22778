#include "compile/backends.h"
#include "tvmffi_jit/compile/embed.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::compile::detail {

CommandRecord compile_embed_unit(const BuildPlan& plan, const std::string& dir) {
  std::vector<EmbeddedBinary> items;
  for (const auto& e : plan.embeds)
    items.push_back({e.name, e.built_name.empty() ? e.path : util::join_path(dir, e.built_name)});
  EmbedSource source = write_embed_source(items, dir);
  // -fPIC: the object goes into a shared library whatever the unit's language.
  std::vector<std::string> argv = {plan.embed_compiler, "-fPIC"};
  argv.insert(argv.end(), source.compile_flags.begin(), source.compile_flags.end());
  argv.insert(argv.end(), {"-c", source.path, "-o", plan.embed_object_name});
  util::remove_all(util::join_path(dir, plan.embed_object_name));
  return run_checked(argv, dir, "compiling the embedded device binaries");
}

}  // namespace tvmffi_jit::compile::detail
