#include "cache/transfer/zstd_stream.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cache {

namespace {

constexpr size_t kZstdChunk = 128 * 1024;

[[noreturn]] void corrupt_frame(const std::string& why) { throw io_error("corrupt blob: " + why); }

}  // namespace

ZstdCompressor::ZstdCompressor(const BlobSink& sink, int level)
    : sink_(sink), cs_(ZSTD_createCCtx()), out_(kZstdChunk) {
  if (!cs_) throw io_error("zstd: out of memory");
  ZSTD_CCtx_setParameter(cs_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cs_, ZSTD_c_checksumFlag, 1);
}

ZstdCompressor::~ZstdCompressor() { ZSTD_freeCCtx(cs_); }

void ZstdCompressor::pump(const char* data, size_t size, ZSTD_EndDirective mode) {
  ZSTD_inBuffer in{data, size, 0};
  for (;;) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t left = ZSTD_compressStream2(cs_, &out, &in, mode);
    if (ZSTD_isError(left)) throw io_error(std::string("zstd: ") + ZSTD_getErrorName(left));
    if (out.pos) sink_(out_.data(), out.pos);
    if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) break;
  }
}

ZstdDecompressor::ZstdDecompressor(const BlobSource& source)
    : source_(source), ds_(ZSTD_createDCtx()), in_(kZstdChunk), out_(kZstdChunk) {
  if (!ds_) throw io_error("zstd: out of memory");
  // The default window limit (128 MiB) bounds the decoder's memory.
}

ZstdDecompressor::~ZstdDecompressor() { ZSTD_freeDCtx(ds_); }

bool ZstdDecompressor::read_exact(char* dst, size_t size) {
  while (size > 0) {
    if (out_pos_ == out_end_ && !refill()) return false;
    size_t n = std::min(size, out_end_ - out_pos_);
    std::memcpy(dst, out_.data() + out_pos_, n);
    out_pos_ += n;
    dst += n;
    size -= n;
  }
  return true;
}

void ZstdDecompressor::expect_zero_tail(size_t max_bytes) {
  size_t seen = 0;
  for (;;) {
    if (out_pos_ == out_end_ && !refill()) break;
    for (; out_pos_ < out_end_; ++out_pos_, ++seen)
      if (out_[out_pos_] != 0 || seen >= max_bytes) corrupt_frame("data after the end of the archive");
  }
  if (in_pos_ < in_size_) corrupt_frame("bytes after the compressed frame");
  char extra;
  if (source_(&extra, 1) != 0) corrupt_frame("bytes after the compressed frame");
}

bool ZstdDecompressor::refill() {
  out_pos_ = out_end_ = 0;
  while (!frame_done_) {
    if (in_pos_ == in_size_) {
      in_size_ = source_(in_.data(), in_.size());
      in_pos_ = 0;
      if (in_size_ == 0) corrupt_frame("truncated (the compressed stream ends early)");
    }
    ZSTD_inBuffer in{in_.data(), in_size_, in_pos_};
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    size_t r = ZSTD_decompressStream(ds_, &out, &in);
    if (ZSTD_isError(r)) corrupt_frame(std::string("zstd: ") + ZSTD_getErrorName(r));
    in_pos_ = in.pos;
    if (r == 0) frame_done_ = true;
    if (out.pos > 0) {
      out_end_ = out.pos;
      return true;
    }
  }
  return false;
}

}  // namespace tvmffi_jit::cache
