#include "build_module.h"

#include <algorithm>

#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/compile/precompiled_headers.h"
#include "tvmffi_jit/compile/uncached_build.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cli {

// The device-code compiler the plan runs: "nvcc", "nvrtc", "hipcc", or null
// for a module of C/C++ sources only (no device compiler involved).
nlohmann::json device_compiler_json(const compile::BuildPlan& plan) {
  if (plan.nvrtc) return "nvrtc";
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& s : *steps) {
      if (s.language == compile::Language::kCuda) return "nvcc";
      if (s.language == compile::Language::kHip) return "hipcc";
    }
  return nullptr;
}

// One command of a build: "commands" lists them, "failed_command" is one.
nlohmann::json command_json(const compile::CommandRecord& c) {
  nlohmann::json cj;
  cj["description"] = c.description;
  cj["argv"] = c.argv;
  cj["seconds"] = c.seconds;
  cj["output"] = c.output;
  return cj;
}

// The fields of share/tvmffi-jit/build.schema.json; a new field is added
// there and in docs/build.md in the same change.
nlohmann::json result_json(const compile::BuildPlan& plan, const compile::BuildResult& r) {
  nlohmann::json j;
  j["schema_version"] = kBuildJsonSchemaVersion;
  j["path"] = r.artifact_path;
  j["name"] = plan.name;
  j["emit"] = compile::emit_kind_name(plan.emit);
  j["compiler"] = device_compiler_json(plan);
  j["backend"] = compile::gpu_backend_name(plan.backend);
  j["functions"] = plan.functions;
  j["archs"] = nlohmann::json::array();
  for (const auto& a : plan.archs) j["archs"].push_back(a.text());
  for (const auto& a : plan.rocm_archs) j["archs"].push_back(a);
  if (!plan.arch_source.empty()) j["arch_source"] = plan.arch_source;
  j["build_dir"] = r.build_dir;
  j["commands"] = nlohmann::json::array();
  for (const auto& c : r.commands) j["commands"].push_back(command_json(c));
  if (plan.nvrtc) {
    j["lowered_names"] = nlohmann::json::object();
    for (const auto& [expr, mangled] : r.lowered_names) j["lowered_names"][expr] = mangled;
  }
  j["up_to_date"] = r.up_to_date;
  j["launcher_fallbacks"] = compile::count_launcher_fallbacks(r.commands);
  j["seconds"] = r.seconds;
  return j;
}

nlohmann::json cached_result_json(const compile::BuildPlan& plan, const compile::CachedBuildResult& cr) {
  nlohmann::json j = result_json(plan, cr.build);
  j["cache"] = cache::cache_status_name(cr.cache);
  j["key"] = cr.key;
  j["entry_dir"] = cr.entry_dir.empty() ? nlohmann::json() : nlohmann::json(cr.entry_dir);
  if (cr.cache == cache::CacheStatus::kMiss) j["miss_reason"] = cr.miss_reason;
  if (cr.cache == cache::CacheStatus::kRemoteHit) j["remote"] = cr.remote_source;
  j["objects_reused"] = cr.objects_reused;
  j["objects_compiled"] = cr.objects_compiled;
  j["rehashed"] = {{"files", cr.rehashed.files}, {"bytes", cr.rehashed.bytes}};
  if (cr.watched) j["watched"] = true;
  return j;
}

// One module, cached or not: the same for a single build and every module of a batch.
ModuleOutcome build_module(Shared& sh, const Planned& p, util::JobGate::Party* party) {
  const BuildRequest& r = sh.request;
  const compile::BuildPlan& plan = *p.plan;
  compile::ExecuteOptions exec = sh.exec;
  exec.party = party;
  exec.base_dir = p.module->base_dir;
  if (r.batch) exec.module = plan.name;
  ModuleOutcome out;
  if (r.use_cache) {
    compile::CachedBuildOptions co;
    co.storage = sh.storage;
    co.force = r.force;
    co.verify = r.verify;
    co.keep_key_trace = sh.ctx.global.verbosity >= 2;  // -vv: what every key was hashed from
    co.exec = exec;
    co.base_dir = p.module->base_dir;
    co.environment = compile::relevant_environment(r.env);
    co.in_flight = &sh.in_flight;
    co.only_if_cached = r.only_if_cached;
    compile::CachedBuildResult cr = compile::cached_build(plan, p.module->manifest, p.tc, co);
    if (r.only_if_cached && cr.cache == cache::CacheStatus::kMiss) {
      out.item.status = compile::BatchStatus::kHit;  // answered: nothing was built, the caller builds
      out.only_if_cached_miss = true;
      out.json = nlohmann::json{{"name", plan.name}, {"cache", cache::cache_status_name(cr.cache)}, {"key", cr.key}, {"miss_reason", cr.miss_reason},
                                {"rehashed", {{"files", cr.rehashed.files}, {"bytes", cr.rehashed.bytes}}}};
      return out;
    }
    out.item.status = cr.cache == cache::CacheStatus::kMiss ? compile::BatchStatus::kBuilt : compile::BatchStatus::kHit;
    out.item.objects_reused = cr.objects_reused;
    out.item.objects_compiled = cr.objects_compiled;
    out.path = cr.build.artifact_path;
    out.json = cached_result_json(plan, cr);
    out.entry_dir = cr.entry_dir;
    out.build = std::move(cr.build);
    return out;
  }
  // --build-dir as given (a batch: DIR/NAME), else (--no-cache) a fresh
  // directory under the system temp dir that outlives this process.
  if (exec.pch) exec.pch->prepare_plan(plan, p.tc, compile::relevant_environment(r.env), "");
  if (!r.build_dir.empty()) {
    const std::string dir = r.batch ? util::join_path(r.build_dir, plan.name) : r.build_dir;
    if (exec.verbose) spdlog::info("building {} in {}", plan.name, dir);
    exec.incremental = true;  // a kept directory: only what changed runs again
    out.build = compile::execute_plan(plan, dir, exec);
  } else {
    out.build = compile::build_without_cache(plan, exec);
  }
  out.item.status = compile::BatchStatus::kBuilt;
  out.item.objects_compiled = plan.compile_steps.size() + plan.device_steps.size();
  for (const auto* steps : {&plan.compile_steps, &plan.device_steps})
    for (const auto& step : *steps)
      if (std::find(out.build.up_to_date.begin(), out.build.up_to_date.end(), step.object_name) !=
          out.build.up_to_date.end())
        --out.item.objects_compiled;
  out.path = out.build.artifact_path;
  out.json = result_json(plan, out.build);
  out.json["cache"] = "off";
  return out;
}

}  // namespace tvmffi_jit::cli
