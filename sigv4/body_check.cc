#include "sigv4/body_check.h"

#include <utility>

#include "sigv4/errc.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {
namespace {

// Lower case only, as S3 (and the door today) takes it.
bool IsHexSha256(std::string_view text) {
  return text.size() == 64 &&
         text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

BodyCheck::BodyCheck(BodyExpect expect) {
  const std::string& payload = expect.content_sha256;
  if (expect.presigned || payload == kUnsignedPayload) {
    // Nothing signs the payload: the checksum headers are all there is.
  } else if (auto kind = StreamingPayloadKind(payload)) {
    expect.chunked.kind = *kind;
    decoder_.emplace(std::move(expect.chunked));
    error_ = decoder_->error();
  } else if (IsHexSha256(payload)) {
    payload_hash_.emplace();
    expected_hash_ = payload;
  } else {
    error_ = Errc::kUnsupportedPayload;
  }
  if (!error_) error_ = header_checksum_.Expect(expect.headers);
  if (!error_) error_ = content_md5_.Expect(expect.headers);
}

std::error_code BodyCheck::Feed(std::string_view received, std::string* data) {
  if (!error_ && finished_ && !received.empty()) error_ = Errc::kBadChunk;
  if (error_) return error_;
  const std::size_t before = data->size();
  if (decoder_) {
    if ((error_ = decoder_->Feed(received, data))) return error_;
  } else {
    data->append(received);
    if (payload_hash_) payload_hash_->Update(received);
  }
  const std::string_view added = std::string_view(*data).substr(before);
  header_checksum_.Update(added);
  content_md5_.Update(added);
  return {};
}

std::error_code BodyCheck::Finish() {
  if (error_ || finished_) return error_;
  finished_ = true;
  if (decoder_) {
    error_ = decoder_->Finish();
  } else if (payload_hash_ &&
             !ConstantTimeEqual(payload_hash_->HexDigest(), expected_hash_)) {
    error_ = Errc::kPayloadHashMismatch;
  }
  if (!error_) error_ = header_checksum_.Check();
  if (!error_) error_ = content_md5_.Check();
  return error_;
}

}  // namespace fencepost::sigv4
