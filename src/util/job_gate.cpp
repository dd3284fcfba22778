#include "tvmffi_jit/util/job_gate.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/jobserver.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::util {

JobGate::Ticket::Ticket(Ticket&& other) noexcept
    : gate_(other.gate_),
      slots_(other.slots_),
      bytes_(other.bytes_),
      weight_(other.weight_),
      admission_(other.admission_) {
  other.gate_ = nullptr;
}

JobGate::Ticket& JobGate::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = other.gate_;
    slots_ = other.slots_;
    bytes_ = other.bytes_;
    weight_ = other.weight_;
    admission_ = other.admission_;
    other.gate_ = nullptr;
  }
  return *this;
}

JobGate::Ticket::~Ticket() { release(); }

void JobGate::Ticket::release() {
  if (gate_) gate_->give_back(slots_, bytes_, weight_);
  gate_ = nullptr;
}

JobGate::JobGate(int slots, uint64_t memory_bytes, bool lend_idle_slots)
    : slots_(slots > 0 ? slots : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
      memory_(memory_bytes),
      free_slots_(slots_),
      lend_(lend_idle_slots) {}

JobGate::~JobGate() = default;

std::optional<std::string> JobGate::jobserver_makeflags() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!lend_) return std::nullopt;
  if (!jobserver_) {
    try {
      jobserver_ = std::make_unique<Jobserver>(slots_);
    } catch (const Error& e) {  // best effort: without it a job splits on the slots it holds
      spdlog::debug("no jobserver for split compilation: {}", e.what());
      return std::nullopt;
    }
  }
  return jobserver_->makeflags();
}

int JobGate::lent_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobserver_ ? std::max(0, lent_ - jobserver_->available()) : 0;
}

void JobGate::stop_lending() {
  std::lock_guard<std::mutex> lock(mutex_);
  lend_ = false;
}

int JobGate::lent_slots() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lent_;
}

void JobGate::lend_idle_locked() {
  if (!lend_ || !jobserver_ || waiting_ > 0 || held_for_ > 0 || free_slots_ <= 0) return;
  int n = free_slots_;
  // A lent slot runs a compiler thread, which needs memory as a job does:
  // each one reserves what a slot of the largest job admitted so far
  // reserves, within the budget, so lending never passes it.
  if (memory_ != 0 && lend_bytes_per_slot_ > 0) {
    const uint64_t room = memory_ > reserved_ ? memory_ - reserved_ : 0;
    n = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(n), room / lend_bytes_per_slot_));
  }
  const int lent = jobserver_->put(n);
  free_slots_ -= lent;
  lent_ += lent;
  if (memory_ != 0) {
    lent_bytes_ += lend_bytes_per_slot_ * static_cast<uint64_t>(lent);
    reserved_ += lend_bytes_per_slot_ * static_cast<uint64_t>(lent);
    peak_reserved_ = std::max(peak_reserved_, reserved_);
  }
}

bool JobGate::take_back_one_locked() {
  if (lent_ <= 0 || !jobserver_ || !jobserver_->take()) return false;
  // Lent at different reservations over time: each token gives back its share.
  const uint64_t bytes = lent_ == 1 ? lent_bytes_ : lent_bytes_ / static_cast<uint64_t>(lent_);
  lent_bytes_ -= bytes;
  reserved_ -= bytes;
  ++free_slots_;
  --lent_;
  return true;
}

void JobGate::Party::check_in() {
  if (gate_ && !checked_in_.exchange(true)) gate_->checked_in();
}

void JobGate::hold(size_t parties, std::chrono::milliseconds max_wait) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_for_ = parties;
    hold_until_ = std::chrono::steady_clock::now() + max_wait;
  }
  changed_.notify_all();
}

void JobGate::release_hold() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_for_ = 0;
  }
  changed_.notify_all();
}

void JobGate::checked_in() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    count_check_in();
  }
  changed_.notify_all();
}

void JobGate::count_check_in() {
  if (held_for_ > 0) --held_for_;
}

int JobGate::slots_to_meet(const Shape& shape, double floor, int max_slots) {
  max_slots = std::max(1, max_slots);
  const double weight = std::max(0.0, shape.weight);
  if (floor <= 0 || weight <= floor) return 1;
  if (shape.serial < 0) return std::min(max_slots, static_cast<int>(std::ceil(weight / floor)));
  const double serial = std::min(weight, shape.serial);
  const double room = floor - serial;  // what the splittable part may take
  if (room <= 0) return max_slots;     // it ends last whatever it gets: every slot it can use
  return std::clamp(static_cast<int>(std::ceil((weight - serial) / room)), 1, max_slots);
}

double JobGate::floor_with_long_jobs(const std::vector<std::pair<Shape, int>>& jobs, double running_weight,
                                     int slots) {
  const double s = std::max(1, slots);
  double total = std::max(0.0, running_weight), longest = 0;
  for (const auto& [shape, max_slots] : jobs) {
    total += std::max(0.0, shape.weight);
    longest = std::max(longest, shape.weight);
  }
  auto fits = [&](double t) {
    double need = std::max(0.0, running_weight);
    for (const auto& [shape, max_slots] : jobs)
      need += shape.weight > t ? slots_to_meet(shape, t, max_slots) * t : std::max(0.0, shape.weight);
    return need <= s * t;
  };
  double lo = total / s, hi = std::max(lo, longest);
  if (lo <= 0 || fits(lo)) return lo;
  // Every job on one slot by `longest` fits (its weight over the slots is
  // at most `longest` when a floor above it is needed, else lo would fit).
  if (!fits(hi)) return hi;
  for (int i = 0; i < 40 && hi - lo > 1e-3 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return hi;
}

bool JobGate::fits_locked(int slots, uint64_t bytes_per_slot) const {
  return free_slots_ >= slots &&
         (memory_ == 0 || reserved_ + bytes_per_slot * static_cast<uint64_t>(slots) <= memory_);
}

void JobGate::wait_for_turn_locked(std::unique_lock<std::mutex>& lock, const Waiter& me, uint64_t bytes_per_slot) {
  // Only the first in serving order may start: a job that does not fit yet
  // (memory) is not overtaken by smaller ones behind it, so it cannot starve.
  // A slot lent to a compiler's thread comes back through the fifo, not
  // through give_back(): the first in line looks for one every few ms.
  constexpr auto kReclaimPoll = std::chrono::milliseconds(5);
  for (;;) {
    if (held_for_ > 0 && std::chrono::steady_clock::now() >= hold_until_) held_for_ = 0;
    const bool first = held_for_ == 0 && *queue_.begin() == me;
    if (first)
      while (!fits_locked(1, bytes_per_slot) && take_back_one_locked()) {
      }
    if (first && fits_locked(1, bytes_per_slot)) return;
    if (held_for_ > 0)
      changed_.wait_until(lock, hold_until_);
    else if (first && lent_ > 0)
      changed_.wait_for(lock, kReclaimPoll);
    else
      changed_.wait(lock);
  }
}

int JobGate::slots_wanted_locked(const Shape& shape, double counted, int max_slots) const {
  if (waiting_ == 0) return max_slots;  // the tail: nobody else will use the free cores
  if (counted <= 0) return 1;
  // The critical path: a job longer than the floor (a fair share of the
  // work left) ends last unless it runs on more cores.
  const double floor = (waiting_weight_ + running_weight_ + counted) / static_cast<double>(slots_);
  Shape mine = shape;
  mine.weight = counted;
  const int want = slots_to_meet(mine, floor, max_slots);
  if (want <= 1) return want;
  // It is long: the floor the long jobs leave (floor_with_long_jobs).
  std::vector<std::pair<Shape, int>> jobs{{mine, max_slots}};
  for (const auto& [at, waiter] : shapes_) jobs.push_back(waiter);
  return slots_to_meet(mine, floor_with_long_jobs(jobs, running_weight_, slots_), max_slots);
}

JobGate::Ticket JobGate::acquire(int max_slots, uint64_t bytes_per_slot, Priority priority, const Shape& shape,
                                 Party* party) {
  max_slots = std::max(1, max_slots);
  const double weight = shape.weight;
  // A job larger than the whole budget runs alone instead of never.
  if (memory_ != 0) bytes_per_slot = std::min(bytes_per_slot, memory_);
  std::unique_lock<std::mutex> lock(mutex_);
  const Waiter me = std::make_tuple(-static_cast<int>(priority), -weight, shape.key, arrivals_++);
  queue_.insert(me);
  ++waiting_;
  const double counted = priority == Priority::kNormal ? std::max(0.0, weight) : 0.0;
  waiting_weight_ += counted;
  const uint64_t arrival = std::get<3>(me);
  if (priority == Priority::kNormal) shapes_.emplace(arrival, std::make_pair(shape, max_slots));
  // The module checks in once its job is queued, under the same lock: were
  // the hold to end first, the jobs already queued would start without it.
  if (party && party->gate_ == this && !party->checked_in_.exchange(true)) {
    count_check_in();
    if (held_for_ == 0) changed_.notify_all();  // the first in line may be another module's job
  }
  wait_for_turn_locked(lock, me, bytes_per_slot);
  queue_.erase(me);
  shapes_.erase(arrival);
  --waiting_;
  waiting_weight_ = std::max(0.0, waiting_weight_ - counted);
  const int want = slots_wanted_locked(shape, counted, max_slots);
  int n = 1;
  while (n < std::min(want, max_slots) && fits_locked(n + 1, bytes_per_slot)) ++n;
  running_weight_ += counted;
  free_slots_ -= n;
  reserved_ += bytes_per_slot * static_cast<uint64_t>(n);
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  peak_slots_ = std::max(peak_slots_, slots_ - free_slots_);
  Ticket t;
  t.gate_ = this;
  t.slots_ = n;
  t.bytes_ = bytes_per_slot * static_cast<uint64_t>(n);
  t.weight_ = counted;
  t.admission_ = admissions_++;
  if (priority == Priority::kNormal) lend_bytes_per_slot_ = std::max(lend_bytes_per_slot_, bytes_per_slot);
  lend_idle_locked();  // the last waiter started: what is left idles unless lent
  lock.unlock();
  changed_.notify_all();  // the next in line may fit too
  return t;
}

void JobGate::give_back(int slots, uint64_t bytes, double weight) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_slots_ += slots;
    reserved_ -= bytes;
    running_weight_ = std::max(0.0, running_weight_ - weight);
    lend_idle_locked();
  }
  changed_.notify_all();
}

uint64_t JobMemoryEstimate::reservation() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!learn_ || largest_ == 0) return configured_;
  return std::max<uint64_t>(largest_ + largest_ / 4, 64ull << 20);
}

void JobMemoryEstimate::observe(uint64_t peak_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  largest_ = std::max(largest_, peak_bytes);
}

uint64_t JobMemoryEstimate::largest_seen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return largest_;
}

uint64_t JobGate::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_reserved_;
}

size_t JobGate::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

int JobGate::peak_slots() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_slots_;
}

std::optional<uint64_t> parse_meminfo_available(std::string_view text) {
  for (const auto& line : split_lines(text)) {
    if (!starts_with(line, "MemAvailable:")) continue;
    std::vector<std::string> words = split_any(line.substr(13), " \t");
    if (words.empty() || words[0].size() > 15) return std::nullopt;
    uint64_t kib = 0;
    for (char c : words[0]) {
      if (c < '0' || c > '9') return std::nullopt;
      kib = kib * 10 + static_cast<uint64_t>(c - '0');
    }
    const bool in_kib = words.size() >= 2 && (words[1] == "kB" || words[1] == "KiB");
    return in_kib ? kib * 1024 : kib;
  }
  return std::nullopt;
}

std::optional<uint64_t> available_memory_bytes() {
  auto text = try_read_file("/proc/meminfo");  // the kernel's, a few KiB
  if (!text) return std::nullopt;
  return parse_meminfo_available(*text);
}

}  // namespace tvmffi_jit::util
