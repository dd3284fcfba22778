// S3's XML error bodies, read by the HTTP transfer (http.cpp) that the S3
// backend is built on (s3_errors.cpp).
#pragma once

#include <string>
#include <string_view>

namespace tvmffi_jit::cache {

// What an error reply body says, for a warning: S3's XML error
// (`<Code>AccessDenied</Code><Message>...</Message>`) as
// "AccessDenied: Access Denied." plus what to do for the usual codes; ""
// when the body is not one. Reads at most the first 64 KiB of the body.
std::string s3_error_reason(std::string_view body);

// The bare <Code> of an S3 XML error body, "" when none (reads at most the first 64 KiB).
std::string s3_error_code(std::string_view body);

}  // namespace tvmffi_jit::cache
