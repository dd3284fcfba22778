// Signed cache entries (cache/transfer/signing.h): key files, the signed message,
// and which signatures a reader accepts.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cache;

namespace {

unsigned mode_of(const std::string& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

BlobEntry sample_entry() {
  BlobEntry e;
  e.dir = "m_" + std::string(16, 'a');
  e.key = std::string(64, 'a');
  e.files = {{"entry.json", 120, std::string(64, '1')}, {"m.so", 5000, std::string(64, '2')}};
  return e;
}

// The message of exit 2 a key file gets.
std::string key_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
    return e.what();
  }
  FAIL("no error");
  return "";
}

}  // namespace

TEST_CASE("keygen writes a 0600 secret and a 0644 public key file as NAME:base64", "[cache][signing]") {
  util::TempDir tmp;
  const mode_t old_umask = ::umask(077);  // the modes must not depend on the caller's umask
  KeyPairFiles f = generate_key_pair("ci-1", tmp.path());
  ::umask(old_umask);
  CHECK(f.secret_file == tmp.path() + "/ci-1.sec");
  CHECK(f.public_file == tmp.path() + "/ci-1.pub");
  CHECK(mode_of(f.secret_file) == 0600);
  CHECK(mode_of(f.public_file) == 0644);
  std::string pub = util::read_file(f.public_file);
  REQUIRE(pub.rfind("ci-1:", 0) == 0);
  CHECK(util::base64_decode(pub.substr(5, pub.size() - 6))->size() == 32);
  SecretKey sec = read_secret_key(f.secret_file);
  PublicKey pk = read_public_key(f.public_file);
  CHECK(sec.name == "ci-1");
  CHECK(pk.key == sec.public_key);
}

TEST_CASE("keygen never overwrites a key file nor writes through a planted symlink", "[cache][signing]") {
  util::TempDir tmp;
  generate_key_pair("ci", tmp.path());
  const std::string sec_before = util::read_file(tmp.path() + "/ci.sec");
  CHECK(key_error([&] { generate_key_pair("ci", tmp.path()); }).find("already exists") != std::string::npos);
  CHECK(util::read_file(tmp.path() + "/ci.sec") == sec_before);
  // A symlink where the public key would go: refused, and no secret file left behind.
  const std::string target = tmp.path() + "/victim";
  util::write_file(target, "keep me");
  REQUIRE(::symlink(target.c_str(), (tmp.path() + "/other.pub").c_str()) == 0);
  CHECK(key_error([&] { generate_key_pair("other", tmp.path()); }).find("already exists") != std::string::npos);
  CHECK(util::read_file(target) == "keep me");
  CHECK_FALSE(util::path_exists(tmp.path() + "/other.sec"));
  CHECK(key_error([&] { generate_key_pair("../x", tmp.path()); }).find("key name") != std::string::npos);
}

TEST_CASE("the signed message is domain-separated and length-prefixed", "[cache][signing]") {
  using namespace std::string_literals;
  CHECK(signed_message("ci", "ab", "cd") ==
        "domain\0"s "29\0"s "tvmffi-jit entry signature v1\0"s
        "signer\0"s "2\0"s "ci\0"s
        "portable_key\0"s "2\0"s "ab\0"s
        "manifest_digest\0"s "2\0"s "cd\0"s);
  // Moving bytes between fields changes the message.
  CHECK(signed_message("ci", "ab", "cd") != signed_message("cia", "b", "cd"));
}

TEST_CASE("an entry is trusted only when a trusted key of the signer's name verifies it", "[cache][signing]") {
  util::TempDir tmp;
  generate_key_pair("ci", tmp.path());
  util::TempDir other_dir;
  generate_key_pair("ci", other_dir.path());  // another key under the same name: an impostor
  generate_key_pair("dev", other_dir.path());
  SecretKey ci = read_secret_key(tmp.path() + "/ci.sec");
  SecretKey impostor = read_secret_key(other_dir.path() + "/ci.sec");
  SecretKey dev = read_secret_key(other_dir.path() + "/dev.sec");
  std::vector<PublicKey> trusted = {read_public_key(tmp.path() + "/ci.pub")};

  BlobEntry e = sample_entry();
  CHECK_FALSE(trusted_signer(trusted, e));  // unsigned
  e.signatures.push_back(sign_blob_entry(ci, e));
  CHECK(trusted_signer(trusted, e) == std::optional<std::string>("ci"));
  CHECK_FALSE(trusted_signer({}, e));  // nothing trusted: nothing is vouched for

  BlobEntry changed = e;
  changed.files[1].sha256[0] = '3';  // another artifact under the same signature
  CHECK_FALSE(trusted_signer(trusted, changed));
  changed = e;
  changed.key[0] = 'b';  // the signature moved to another key
  CHECK_FALSE(trusted_signer(trusted, changed));
  changed = e;
  changed.signatures[0].signer = "dev";  // relabelled
  CHECK_FALSE(trusted_signer(trusted, changed));

  BlobEntry forged = sample_entry();
  forged.signatures.push_back(sign_blob_entry(impostor, forged));
  forged.signatures.push_back(sign_blob_entry(dev, forged));
  CHECK_FALSE(trusted_signer(trusted, forged));
  forged.signatures.push_back(sign_blob_entry(ci, forged));  // one good signature among others suffices
  CHECK(trusted_signer(trusted, forged) == std::optional<std::string>("ci"));
}

TEST_CASE("bad key files are usage errors naming the file and what to give", "[cache][signing]") {
  util::TempDir tmp;
  generate_key_pair("ci", tmp.path());
  const std::string sec = tmp.path() + "/ci.sec", pub = tmp.path() + "/ci.pub";
  // A secret key where a public one is expected and the reverse: told apart by length.
  std::string e = key_error([&] { read_public_key(sec); });
  CHECK(e.find(sec) != std::string::npos);
  CHECK(e.find("NAME.pub") != std::string::npos);
  CHECK(key_error([&] { read_secret_key(pub); }).find("NAME.sec") != std::string::npos);
  const std::string junk = tmp.path() + "/junk";
  util::write_file(junk, "ci:not base64!\n");
  CHECK(key_error([&] { read_public_key(junk); }).find("base64") != std::string::npos);
  util::write_file(junk, std::string(5000, 'A'));
  CHECK(key_error([&] { read_public_key(junk); }).find("larger than") != std::string::npos);
  CHECK(key_error([&] { read_public_key(tmp.path() + "/missing.pub"); }).find("cannot be read") != std::string::npos);
  const std::string fifo = tmp.path() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(key_error([&] { read_public_key(fifo); }).find("cannot be read") != std::string::npos);  // never blocks
  // A secret key whose public half is not the one its seed derives.
  std::string text = util::read_file(sec);
  auto raw = util::base64_decode(text.substr(3, text.size() - 4));
  REQUIRE(raw);
  (*raw)[40] ^= 1;
  util::write_file(junk, "ci:" + util::base64_encode(*raw) + "\n");
  CHECK(key_error([&] { read_secret_key(junk); }).find("damaged") != std::string::npos);
}

TEST_CASE("a signature verified once is remembered for exactly that key, signature and message", "[cache][signing]") {
  util::TempDir tmp;
  generate_key_pair("ci", tmp.path());
  SecretKey ci = read_secret_key(tmp.path() + "/ci.sec");
  PublicKey pub = read_public_key(tmp.path() + "/ci.pub");
  const std::string msg = local_signed_message("ci", std::string(64, 'a'), std::string(64, 'b'));
  const std::string sig = sign_message(ci, msg, "a test message");
  CHECK(verify_message(pub.key, sig, msg));
  CHECK(verify_message(pub.key, sig, msg));  // the remembered answer
  std::string other_msg = msg;
  other_msg.back() ^= 1;
  CHECK_FALSE(verify_message(pub.key, sig, other_msg));
  std::string other_sig = sig;
  other_sig[0] ^= 1;
  CHECK_FALSE(verify_message(pub.key, other_sig, msg));
  std::string other_key = pub.key;
  other_key[0] ^= 1;
  CHECK_FALSE(verify_message(other_key, sig, msg));
  CHECK(verify_message(pub.key, sig, msg));
}
