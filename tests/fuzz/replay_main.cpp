// Replays fuzz corpora through LLVMFuzzerTestOneInput in an ordinary build
// (gcc, optionally ASan+UBSan): `fuzz_replay DIR|FILE...`. Fails only by
// crashing, exactly like the fuzzer; prints how many inputs ran.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs\n");
    return 2;
  }
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", p.c_str());
      return 2;
    }
    // Copy into an exactly-sized heap buffer so ASan flags any overread.
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    uint8_t* buf = new uint8_t[bytes.size() ? bytes.size() : 1];
    std::copy(bytes.begin(), bytes.end(), buf);
    LLVMFuzzerTestOneInput(buf, bytes.size());
    delete[] buf;
  }
  std::printf("fuzz_replay: %zu inputs ran\n", inputs.size());
  return 0;
}
