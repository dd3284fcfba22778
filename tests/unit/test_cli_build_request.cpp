// cli::resolve_build_request: the command line, environment and manifests of
// `build` resolved once, the same for one module and for a batch.
#include <catch2/catch.hpp>

#include "cli/build_request.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cli;

namespace {

struct Dir {
  util::TempDir dir;
  std::string add(const std::string& name, const std::string& text) {
    const std::string p = util::join_path(dir.path(), name);
    util::write_file(p, text);
    return p;
  }
  std::string module(const std::string& name) {
    return add(name + ".json", R"({"name": ")" + name + R"(", "cpp_sources": "int x;"})");
  }
};

MachineResources machine(int cores, uint64_t mem) {
  MachineResources m;
  m.cores = cores;
  m.mem_available = mem;
  return m;
}

int usage_error_of(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const Error& e) {
    *message = e.what();
    return e.exit_code();
  }
  return 0;
}

}  // namespace

TEST_CASE("every module of a batch gets the environment's remote, base dir and launchers", "[cli][build_request]") {
  Dir d;
  BuildArgs args;
  args.manifests = {d.module("a"), d.module("b")};
  args.verify = true;
  args.force = true;
  auto env = toolchain::fixed_environment({{"TVMFFI_JIT_REMOTE", "redis://127.0.0.1:1/0"},
                                           {"TVMFFI_JIT_REMOTE_NAMESPACE", "ns1"},
                                           {"TVMFFI_JIT_BASE_DIR", d.dir.path()},
                                           {"TVMFFI_JIT_CUDA_LAUNCHER", "sccache"},
                                           {"TVM_FFI_CUDA_ARCH_LIST", "8.0"}});
  BuildRequest r = resolve_build_request(args, env, machine(8, 64ull << 30));
  CHECK(r.batch);
  REQUIRE(r.modules.size() == 2);
  CHECK(r.remote.urls == std::vector<std::string>{"redis://127.0.0.1:1/0"});
  CHECK(r.remote.key_namespace == "ns1");
  CHECK(r.verify);
  CHECK(r.force);
  CHECK(r.plan.env_cuda_launcher == std::optional<std::string>("sccache"));
  CHECK(r.plan.env_arch_list == std::optional<std::string>("8.0"));
  for (const auto& m : r.modules) CHECK(m.base_dir == util::absolute_path(d.dir.path()));
  // The same for one module: the same request, a batch of one.
  args.manifests = {d.module("c")};
  BuildRequest one = resolve_build_request(args, env, machine(8, 64ull << 30));
  CHECK_FALSE(one.batch);
  CHECK(one.remote.urls == r.remote.urls);
  CHECK(one.modules.at(0).base_dir == r.modules.at(0).base_dir);
}

TEST_CASE("without a base dir each module's portable keys are relative to its manifest", "[cli][build_request]") {
  Dir d;
  util::make_directories(util::join_path(d.dir.path(), "sub"));
  BuildArgs args;
  args.manifests = {d.module("a"), d.add("sub/b.json", R"({"name": "b", "cpp_sources": "int y;"})")};
  BuildRequest r = resolve_build_request(args, toolchain::fixed_environment({}), machine(2, 1ull << 30));
  CHECK(r.modules.at(0).base_dir == util::absolute_path(d.dir.path()));
  CHECK(r.modules.at(1).base_dir == util::absolute_path(util::join_path(d.dir.path(), "sub")));
}

TEST_CASE("one-module options are refused for a batch with exit 2 naming them", "[cli][build_request]") {
  Dir d;
  BuildArgs args;
  args.manifests = {d.module("a"), d.module("b")};
  args.outputs.output = "x.so";
  args.outputs.depfile = "x.d";
  std::string msg;
  CHECK(usage_error_of([&] { resolve_build_request(args, toolchain::fixed_environment({}), machine(2, 1ull << 30)); },
                       &msg) == 2);
  CHECK(msg.find("--output, --depfile") != std::string::npos);
}

TEST_CASE("a --mem-per-job without a unit is refused", "[cli][build_request]") {
  std::string msg;
  CHECK(usage_error_of([&] { resolve_job_limits(0, "4096", machine(4, 8ull << 30)); }, &msg) == 2);
  CHECK(msg.find("--mem-per-job 4096") != std::string::npos);
  CHECK(msg.find("4096M") != std::string::npos);
  JobLimits l = resolve_job_limits(0, "1500M", machine(4, 8ull << 30));
  CHECK(l.cuda_job_bytes == 1500ull << 20);
  CHECK_FALSE(l.learn_job_bytes);
  CHECK(resolve_job_limits(0, "", machine(4, 8ull << 30)).learn_job_bytes);
}

TEST_CASE("the default -j and the memory budget fit the cgroup's limits", "[cli][build_request]") {
  MachineResources m = machine(64, 200ull << 30);
  m.cgroup.cpus = 4;
  m.cgroup.memory_bytes = 8ull << 30;
  m.cgroup.memory_usage = 1ull << 30;
  JobLimits l = resolve_job_limits(0, "", m);
  CHECK(l.slots == 4);
  CHECK(l.memory_bytes == 7ull << 30);  // the limit less what the cgroup holds
  CHECK(resolve_job_limits(12, "", m).slots == 12);  // -j is the user's word
  // MemAvailable, when it is the smaller.
  m.mem_available = 2ull << 30;
  CHECK(resolve_job_limits(0, "", m).memory_bytes == 2ull << 30);
}

TEST_CASE("with --keep-going a bad manifest is a failed module of the batch", "[cli][build_request]") {
  Dir d;
  BuildArgs args;
  args.manifests = {d.module("a"), d.add("bad.json", R"({"name": "bad", "sourcez": []})"), d.module("c")};
  std::string msg;
  CHECK(usage_error_of([&] { resolve_build_request(args, toolchain::fixed_environment({}), machine(2, 1ull << 30)); },
                       &msg) == 2);
  args.keep_going = true;
  BuildRequest r = resolve_build_request(args, toolchain::fixed_environment({}), machine(2, 1ull << 30));
  REQUIRE(r.modules.size() == 3);
  CHECK(r.modules[0].error.empty());
  CHECK(r.modules[1].manifest.name == "bad");
  CHECK(r.modules[1].error.find("sourcez") != std::string::npos);
  CHECK(r.modules[2].error.empty());
}

TEST_CASE("the AWS variables are read with the remote ones and checked only when an s3 remote uses them",
          "[cli][build_request][remote]") {
  const std::map<std::string, std::string> bad_endpoint = {{"AWS_ENDPOINT_URL", "ftp://127.0.0.1:1"},
                                                           {"TVMFFI_JIT_REMOTE", "redis://127.0.0.1:1/0"}};
  cache::RemoteOptions redis = remote_options_from_environment({}, false, toolchain::fixed_environment(bad_endpoint));
  CHECK(redis.urls == std::vector<std::string>{"redis://127.0.0.1:1/0"});

  std::map<std::string, std::string> s3_env = bad_endpoint;
  s3_env["TVMFFI_JIT_REMOTE"] = "s3://bucket";
  std::string message;
  CHECK(usage_error_of([&] { remote_options_from_environment({}, false, toolchain::fixed_environment(s3_env)); },
                       &message) == 2);
  CHECK(message.find("AWS_ENDPOINT_URL") != std::string::npos);

  s3_env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9000";
  s3_env["AWS_DEFAULT_REGION"] = "eu-west-3";
  cache::RemoteOptions s3 = remote_options_from_environment({}, true, toolchain::fixed_environment(s3_env));
  CHECK(s3.s3.endpoint_url == "http://127.0.0.1:9000");
  CHECK(s3.s3.region == "eu-west-3");
  CHECK(s3.read_only);
}

TEST_CASE("a lookup's download budget is twice the blob limit unless TVMFFI_JIT_REMOTE_MAX_LOOKUP says otherwise",
          "[cli][build_request][remote]") {
  auto options = [](std::map<std::string, std::string> env) {
    return remote_options_from_environment({}, false, toolchain::fixed_environment(std::move(env)));
  };
  CHECK(options({}).max_lookup_bytes == 2 * options({}).max_blob_bytes);
  CHECK(options({{"TVMFFI_JIT_REMOTE_MAX_BLOB", "64M"}}).max_lookup_bytes == 128ull << 20);
  CHECK(options({{"TVMFFI_JIT_REMOTE_MAX_BLOB", "64M"}, {"TVMFFI_JIT_REMOTE_MAX_LOOKUP", "10M"}}).max_lookup_bytes ==
        10ull << 20);
  CHECK(options({{"TVMFFI_JIT_REMOTE_MAX_BLOB", "16777215T"}}).max_lookup_bytes == ~0ull);  // saturated
  std::string message;
  CHECK(usage_error_of([&] { options({{"TVMFFI_JIT_REMOTE_MAX_LOOKUP", "0"}}); }, &message) == 2);
  CHECK(message.find("TVMFFI_JIT_REMOTE_MAX_LOOKUP") != std::string::npos);
}
