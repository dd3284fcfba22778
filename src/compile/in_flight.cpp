#include "tvmffi_jit/compile/in_flight.h"

namespace tvmffi_jit::compile {

InFlightUnits::Claim::Claim(Claim&& o) noexcept : owner_(o.owner_), key_(std::move(o.key_)), owned_(o.owned_) {
  o.owner_ = nullptr;
}

InFlightUnits::Claim& InFlightUnits::Claim::operator=(Claim&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->release(key_);
    owner_ = o.owner_;
    key_ = std::move(o.key_);
    owned_ = o.owned_;
    o.owner_ = nullptr;
  }
  return *this;
}

InFlightUnits::Claim::~Claim() {
  if (owner_) owner_->release(key_);
}

InFlightUnits::Claim InFlightUnits::claim(const std::string& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  Claim c;
  if (busy_.insert(key).second) {
    c.owner_ = this;
    c.key_ = key;
    c.owned_ = true;
    return c;
  }
  released_.wait(lock, [&] { return busy_.count(key) == 0; });
  return c;
}

void InFlightUnits::release(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_.erase(key);
  }
  released_.notify_all();
}

}  // namespace tvmffi_jit::compile
