// Signed cache entries (docs/remote.md, "Trust"): ed25519 key pairs, the
// signature a writer attaches to each entry of a blob, and the check a
// reader makes against the keys it trusts.
//
// Key files are one text line, `NAME:BASE64`, as Nix's binary-cache keys:
//   NAME.pub  the 32-byte ed25519 public key
//   NAME.sec  64 bytes: the 32-byte private seed, then the public key (the
//             layout libsodium and Nix use), so that a secret key file given
//             where a public one is expected (or the reverse) is told apart
//             by its length, and a damaged one is caught (the public half
//             must be the one the seed derives).
// NAME follows the cache's plain-name rules (cache/root.h
// is_valid_entry_name); it is the signer name inside every signature.
//
// What is signed, for one entry of a blob (pure ed25519, no pre-hash), the
// concatenation of four fields, each encoded as
//   tag '\0' decimal-byte-length '\0' value '\0'
// (the encoding of util::KeyHasher, so no two field sequences share bytes):
//   "domain"          "tvmffi-jit entry signature v1"
//   "signer"          the key's NAME
//   "portable_key"    the entry's portable key, 64 lowercase hex
//   "manifest_digest" blob_entry_digest() of the entry's manifest record,
//                     64 lowercase hex: SHA-256 over its directory name, key
//                     and every file's name, size and SHA-256 (cache/transfer/blob.h)
// The domain keeps these signatures from meaning anything elsewhere; the
// signer's name is inside, so a signature cannot be relabelled to another key
// of the same bytes; the manifest digest pins every byte of every file.
#pragma once

#include <future>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/transfer/blob.h"

namespace tvmffi_jit::cache {

inline constexpr size_t kEd25519PublicKeyBytes = 32;
inline constexpr size_t kEd25519SeedBytes = 32;

struct PublicKey {
  std::string name;
  std::string key;   // 32 raw bytes
  std::string file;  // where it was read from (messages)
};

struct SecretKey {
  std::string name;
  std::string seed;        // 32 raw bytes
  std::string public_key;  // 32 raw bytes
};

struct KeyPairFiles {
  std::string secret_file;  // DIR/NAME.sec, mode 0600
  std::string public_file;  // DIR/NAME.pub, mode 0644
};

// `cache keygen`: a fresh key pair written as DIR/NAME.sec and DIR/NAME.pub.
// Each file is created with O_EXCL|O_NOFOLLOW: an existing file (or a planted
// symlink) is never overwritten: usage_error (exit 2) naming it. A bad NAME is
// exit 2; a directory that cannot be written is exit 5.
KeyPairFiles generate_key_pair(const std::string& name, const std::string& out_dir);

// Key files given by the user (--remote-sign-key, --remote-trusted-key):
// usage_error (exit 2) naming the file and saying what to do when one cannot
// be read, is not a regular file, is over 4 KiB or is not a key of that kind.
SecretKey read_secret_key(const std::string& file);
PublicKey read_public_key(const std::string& file);

// The exact bytes an entry signature covers (see above).
std::string signed_message(const std::string& signer, const std::string& portable_key,
                           const std::string& manifest_digest);

// The bytes a local "built" signature covers (cache/trust.h): domain
// "tvmffi-jit local entry signature v1", signer, the entry's full key, the
// digest of its record (entry_record_digest), in the same encoding.
std::string local_signed_message(const std::string& signer, const std::string& key, const std::string& record_digest);
// The raw ed25519 signature of `msg` (throws Error(kIo) naming `what` if
// OpenSSL fails) and its check against 32 raw public key bytes.
std::string sign_message(const SecretKey& key, const std::string& msg, const std::string& what);
bool verify_message(const std::string& public_key, const std::string& signature, const std::string& msg);

// The signature `key` makes over one manifest record (a blob entry).
BlobSignature sign_blob_entry(const SecretKey& key, const BlobEntry& entry);

// The name of the first trusted key that signed `entry` (a signature whose
// signer is that key's name and which verifies over `entry`), or nullopt.
std::optional<std::string> trusted_signer(const std::vector<PublicKey>& trusted, const BlobEntry& entry);

// Loads what verifying needs from OpenSSL (its default provider's ed25519
// methods: ~1 ms on the first use in a process, ten times the verification
// itself). The remote tier runs it on a thread while the blob downloads.
void prepare_signature_check();
// prepare_signature_check() on a thread, now: what waits for it holds the
// future (its last copy waits for the thread when destroyed). A failure is
// left for the check that needs OpenSSL to report.
std::shared_future<void> start_signature_setup();

}  // namespace tvmffi_jit::cache
