// The job trace's two formats (docs/build.md#job-trace): JSON lines, and
// Chrome's trace-event JSON that Perfetto and chrome://tracing open.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/job_trace.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;
using nlohmann::json;

namespace {

TracedJob job(const std::string& module, const std::string& step, double start, double end, int split = 0) {
  TracedJob j;
  j.module = module;
  j.step = step;
  j.queued = start;
  j.start = start;
  j.end = end;
  j.split = split;
  return j;
}

std::vector<json> complete_events(const json& doc, const std::string& category = "") {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && (category.empty() || e.at("cat") == category)) out.push_back(e);
  return out;
}

const json& event_named(const json& doc, const std::string& name) {
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name") == name) return e;
  FAIL("no event named " << name);
  throw;
}

}  // namespace

TEST_CASE("the chrome trace gives each job running at once a lane of its own and reuses freed lanes",
          "[build][job_trace]") {
  // a.cu and b.cc overlap: two lanes. mod_a.so starts as a.cu ends, in its
  // lane; mod_b.so starts after mod_a.so ended: the lowest free lane, 1.
  const std::vector<TracedJob> jobs = {
      job("", "planning 2 modules", 0, 0.1),
      job("mod_a", "compiling /src/a.cu", 0.1, 2.0),
      job("mod_b", "compiling /src/b.cc", 0.1, 3.0),
      job("mod_a", "linking mod_a.so", 2.0, 2.5),
      job("mod_b", "linking mod_b.so", 3.0, 3.5),
  };
  const json doc = json::parse(JobTrace::chrome_trace_json(jobs));  // throws if it is not JSON
  REQUIRE(doc.at("displayTimeUnit") == "ms");

  std::map<std::string, int> lane;
  for (const auto& e : complete_events(doc)) lane[e.at("name")] = e.at("tid");
  CHECK(lane.at("planning 2 modules") == 0);
  CHECK(lane.at("mod_a: a.cu") == 1);
  CHECK(lane.at("mod_b: b.cc") == 2);
  CHECK(lane.at("mod_a: mod_a.so") == 1);  // a.cu ended as it started
  CHECK(lane.at("mod_b: mod_b.so") == 1);

  // Named lanes, one per job slot that was used, and the planning lane.
  std::map<int, std::string> lane_names;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name") lane_names[e.at("tid")] = e.at("args").at("name");
  CHECK(lane_names == std::map<int, std::string>{{0, "planning"}, {1, "job lane 1"}, {2, "job lane 2"}});
  CHECK(doc.at("otherData").at("lanes") == 2);

  // Microseconds, and the job's own fields as its args.
  const json& a = event_named(doc, "mod_a: a.cu");
  CHECK(a.at("ts") == 100000);
  CHECK(a.at("dur") == 1900000);
  CHECK(a.at("cat") == "compile");
  CHECK(a.at("args").at("step") == "compiling /src/a.cu");
  CHECK(event_named(doc, "mod_b: mod_b.so").at("cat") == "link");
}

TEST_CASE("the chrome trace lanes never hold two overlapping jobs and number the most that ran at once",
          "[build][job_trace]") {
  std::vector<TracedJob> jobs;
  // Staggered jobs of different lengths: at most 4 overlap (at t = 3.x).
  const double starts[] = {0, 1, 2, 3, 3.5, 6, 6.2, 9};
  const double ends[] = {4, 3.2, 5, 4, 7, 8, 10, 11};
  for (int i = 0; i < 8; ++i) jobs.push_back(job("m" + std::to_string(i), "compiling /s/u.cu", starts[i], ends[i]));
  const json doc = json::parse(JobTrace::chrome_trace_json(jobs));
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> by_lane;
  for (const auto& e : complete_events(doc)) by_lane[e.at("tid")].push_back({e.at("ts"), e.at("ts").get<int64_t>() + e.at("dur").get<int64_t>()});
  for (auto& [l, spans] : by_lane) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second);
  }
  CHECK(by_lane.size() == 4);
  CHECK(doc.at("otherData").at("lanes") == 4);
}

TEST_CASE("the chrome trace shows a split compile's threads nested under its job", "[build][job_trace]") {
  const std::vector<TracedJob> jobs = {job("attn", "compiling /src/attention.cu", 1.0, 5.0, 4),
                                       job("norm", "compiling /src/norm.cu", 1.0, 2.0)};
  const json doc = json::parse(JobTrace::chrome_trace_json(jobs));
  const json& parent = event_named(doc, "attn: attention.cu");
  CHECK(parent.at("args").at("split") == 4);
  const auto threads = complete_events(doc, "split");
  REQUIRE(threads.size() == 4);
  int64_t previous_end = parent.at("ts").get<int64_t>() + parent.at("dur").get<int64_t>();
  std::set<std::string> names;
  for (const auto& t : threads) {
    CHECK(t.at("tid") == parent.at("tid"));  // the job's lane: they do not take lanes of their own
    CHECK(t.at("ts") == parent.at("ts"));
    const int64_t end = t.at("ts").get<int64_t>() + t.at("dur").get<int64_t>();
    CHECK(end < previous_end);  // strictly inside the one above: nested, in every viewer
    previous_end = end;
    names.insert(t.at("name"));
  }
  CHECK(names == std::set<std::string>{"split thread 1/4", "split thread 2/4", "split thread 3/4", "split thread 4/4"});
  // The unsplit job has none, and the counter adds the threads up: 4 + 1 while both run.
  int most = 0;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "C") most = std::max(most, e.at("args").at("split threads").get<int>());
  CHECK(most == 5);
}

TEST_CASE("the chrome trace draws a job on lent slots as one thread and the lent slots in use as a counter",
          "[build][job_trace][jobserver]") {
  TracedJob lent = job("moe", "compiling /src/moe.cu", 0.0, 10.0, 16);
  lent.split_lent = true;  // --split-compile=16 --jobserver: 16 is the most it could take
  const std::vector<TracedJob> jobs = {lent, job("norm", "compiling /src/norm.cu", 0.0, 2.0)};
  const json doc = json::parse(JobTrace::chrome_trace_json(jobs, {{2.5, 3}, {6.0, 1}}));
  CHECK(complete_events(doc, "split").empty());  // which threads ran when is not known: none drawn
  CHECK(event_named(doc, "moe: moe.cu").at("args").at("split_lent") == true);
  int most_running = 0;
  std::vector<int> lent_counter;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "C") continue;
    if (e.at("name") == "running") most_running = std::max(most_running, e.at("args").at("split threads").get<int>());
    if (e.at("name") == "lent slots in use") lent_counter.push_back(e.at("args").at("split threads").get<int>());
  }
  CHECK(most_running == 2);  // one thread each; what they took beyond it is the other counter
  CHECK(lent_counter == std::vector<int>{3, 1});
}

TEST_CASE("the job trace format follows the file's extension: .json is the chrome trace, others JSON lines",
          "[build][job_trace]") {
  CHECK(is_chrome_trace_path("/t/trace.json"));
  CHECK(is_chrome_trace_path("TRACE.JSON"));
  CHECK_FALSE(is_chrome_trace_path("/t/trace.jsonl"));
  CHECK_FALSE(is_chrome_trace_path("/t/trace.trace"));
  CHECK_FALSE(is_chrome_trace_path("/t/json"));

  JobTrace trace;
  CommandRecord rec;
  rec.description = "compiling /src/a.cc";
  rec.started_at = 0.5;
  rec.seconds = 1.5;
  rec.cpu_seconds = 1.25;
  trace.add("mod", rec);
  const std::string lines = job_trace_text(trace, "t.jsonl");
  const json line = json::parse(lines);  // one line, one object
  CHECK(line.at("module") == "mod");
  CHECK(line.at("end") == 2.0);
  CHECK(line.at("cpu") == 1.25);
  const json doc = json::parse(job_trace_text(trace, "t.json"));
  CHECK(event_named(doc, "mod: a.cc").at("dur") == 1500000);
}
