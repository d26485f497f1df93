// Streamed body checks: the aws-chunked decoder gives the same data and the
// same error whatever the split of its input (whole, byte by byte, random),
// over valid bodies of every kind and their truncations, flips, insertions
// and deletions; a wrong chunk signature stops the body before the next
// chunk; the memory held does not grow with the chunk size; and BodyCheck
// checks the payload hash, the x-amz-checksum-* header and Content-MD5 at
// Finish.
#include "sigv4/body_check.h"

#include <gtest/gtest.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "sigv4/errc.h"
#include "sigv4/signer.h"

namespace fencepost::sigv4 {
namespace {

// A client's key and request of this test's own (chunked_test.cc checks
// AWS's published ones): the seed stands for the request's signature.
constexpr char kAmzDate[] = "20250301T101500Z";
const Scope kScope{"20250301", "eu-west-1", "s3"};
const Secret kKey = SigningKey(Secret("body-check-test-secret"), kScope);
const std::string kSeed(64, 'c');
constexpr auto kCrc32c = ChecksumAlgorithm::kCrc32c;

ChunkedCheck CheckOf(PayloadKind kind, std::optional<std::uint64_t> length,
                     ChecksumAlgorithm algorithm = kCrc32c) {
  ChunkedCheck check;
  check.kind = kind;
  check.signing_key = kKey;
  check.amz_date = kAmzDate;
  check.scope = kScope;
  check.seed_signature = kSeed;
  if (kind != PayloadKind::kSigned) {
    check.trailer_header = ChecksumHeaderName(algorithm);
  }
  check.decoded_length = length;
  return check;
}

// A client's aws-chunked body of `data`, one frame per chunk (size line,
// data, CRLF), the final chunk's frame ending the body for kSigned; the
// trailer kinds add a frame of the checksum trailer (signed for
// kSignedTrailer) and its closing empty line.
std::vector<std::string> Frames(PayloadKind kind, std::string_view data,
                                std::size_t chunk_size,
                                ChecksumAlgorithm algorithm = kCrc32c) {
  const bool signs = kind != PayloadKind::kUnsignedTrailer;
  ChunkSigner signer(kKey, kAmzDate, kScope, kSeed);
  std::vector<std::string> frames;
  std::string signature;
  for (std::size_t at = 0;; at += chunk_size) {
    std::string_view piece = data.substr(std::min(at, data.size()), chunk_size);
    std::string frame;
    if (signs) {
      signature = signer.Next(piece);
      frame = ChunkHeader(piece.size(), signature);
    } else {
      char hex[16];
      frame.assign(hex, std::to_chars(hex, hex + 16, piece.size(), 16).ptr);
      frame += "\r\n";
    }
    if (piece.empty()) {
      frames.push_back(frame);
      break;
    }
    frames.push_back(frame.append(piece) + "\r\n");
  }
  if (kind == PayloadKind::kSigned) {
    frames.back() += "\r\n";
    return frames;
  }
  std::string line = std::string(ChecksumHeaderName(algorithm)) + ":" +
                     Base64Checksum(algorithm, data);
  std::string trailer = line + "\r\n";
  if (signs) {
    trailer += "x-amz-trailer-signature:" +
               Signature(kKey, TrailerStringToSign(kAmzDate, kScope, signature,
                                                   line + "\n")) +
               "\r\n";
  }
  frames.push_back(trailer + "\r\n");
  return frames;
}

std::string Joined(const std::vector<std::string>& frames) {
  std::string body;
  for (const std::string& frame : frames) body += frame;
  return body;
}

// Bytes that include CR, LF, ';' and ':'.
std::string Bytes(std::size_t size) {
  std::string data;
  for (std::size_t i = 0; i < size; ++i) data.push_back(char(i * 13 + 10));
  return data;
}

struct Outcome {
  std::error_code error;
  std::string data;
};

// `body` fed to a decoder in pieces that end at `cuts` (ascending), then
// the end.
Outcome FeedCut(const ChunkedCheck& check, std::string_view body,
                std::vector<std::size_t> cuts) {
  ChunkedDecoder decoder(check);
  Outcome out;
  cuts.push_back(body.size());
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    out.error = decoder.Feed(body.substr(from, cut - from), &out.data);
    if (out.error) return out;
    EXPECT_LE(decoder.buffered(), kMaxChunkLine + 2);
    from = cut;
  }
  out.error = decoder.Finish();
  return out;
}

// Fed whole, byte by byte and in random splits: the same error, and the
// same data when the body is good. A refused body's data is what was handed
// out before the error, more of it the finer the split, never anything
// else.
void ExpectSplitsAgree(const ChunkedCheck& check, std::string_view body,
                       std::mt19937* random) {
  ChunkedBody decoded;
  std::error_code error = DecodeAwsChunked(body, check, &decoded);
  Outcome whole = FeedCut(check, body, {});
  ASSERT_EQ(whole.error, error);
  if (!error) {
    ASSERT_EQ(whole.data, decoded.data);
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < body.size(); ++i) every.push_back(i);
  Outcome bytewise = FeedCut(check, body, every);
  ASSERT_EQ(bytewise.error, error) << "byte by byte";
  for (int round = 0; round < 4; ++round) {
    std::vector<std::size_t> cuts;
    for (std::size_t i : every) {
      if ((*random)() % (round * 8 + 2) == 0) cuts.push_back(i);
    }
    Outcome split = FeedCut(check, body, cuts);
    ASSERT_EQ(split.error, error) << cuts.size() << " random cuts";
    ASSERT_TRUE(bytewise.data.starts_with(split.data));
  }
  if (!error) {
    ASSERT_EQ(bytewise.data, decoded.data);
  }
  ASSERT_TRUE(bytewise.data.starts_with(whole.data));
}

// Each way to spoil `body`: cut short, a byte flipped, dropped, or one of
// the grammar's own bytes inserted.
std::vector<std::string> Spoiled(const std::string& body) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    out.push_back(body.substr(0, i));
    std::string flipped = body;
    flipped[i] ^= 1;
    out.push_back(flipped);
    out.push_back(body.substr(0, i) + body.substr(i + 1));
    for (char c : std::string_view("\r\n;: 0")) {
      out.push_back(body.substr(0, i) + c + body.substr(i));
    }
  }
  return out;
}

TEST(ChunkedDecoderTest, SplitsAgreeOnEveryValidBody) {
  std::mt19937 random(7);
  std::string aws_data(66560, 'a');
  // The layout of AWS's examples (64 KiB and 1 KiB of 'a'), with the
  // trailer as HTTP's chunked grammar lays it out and as AWS's
  // documentation shows it (an empty line before it).
  ExpectSplitsAgree(CheckOf(PayloadKind::kSigned, 66560),
                    Joined(Frames(PayloadKind::kSigned, aws_data, 65536)),
                    &random);
  for (auto kind :
       {PayloadKind::kSignedTrailer, PayloadKind::kUnsignedTrailer}) {
    std::vector<std::string> frames = Frames(kind, aws_data, 65536);
    ExpectSplitsAgree(CheckOf(kind, 66560), Joined(frames), &random);
    frames.back() = "\r\n" + frames.back().substr(0, frames.back().size() - 2);
    ExpectSplitsAgree(CheckOf(kind, 66560), Joined(frames), &random);
  }
  for (std::size_t size : {0, 1, 100, 8192, 20000}) {
    for (auto algorithm :
         {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
          ChecksumAlgorithm::kCrc64Nvme, ChecksumAlgorithm::kSha1,
          ChecksumAlgorithm::kSha256}) {
      for (auto kind : {PayloadKind::kSigned, PayloadKind::kSignedTrailer,
                        PayloadKind::kUnsignedTrailer}) {
        std::string body = Joined(Frames(kind, Bytes(size), 8192, algorithm));
        ExpectSplitsAgree(CheckOf(kind, size, algorithm), body, &random);
        ExpectSplitsAgree(CheckOf(kind, std::nullopt, algorithm), body,
                          &random);
      }
    }
  }
}

// What Debian's botocore AwsChunkedWrapper wrote (chunked_test.cc).
TEST(ChunkedDecoderTest, SplitsAgreeOnBotocoreBodies) {
  std::mt19937 random(11);
  for (const char* name : {"crc32", "crc32c", "sha1", "sha256"}) {
    std::ifstream in(std::string(FENCEPOST_SIGV4_FIXTURES) +
                         "/botocore_aws_chunked/" + name + ".body",
                     std::ios::binary);
    std::string body{std::istreambuf_iterator<char>(in), {}};
    ASSERT_FALSE(body.empty()) << name;
    auto algorithm =
        ChecksumFromHeaderName(std::string("x-amz-checksum-") + name);
    ChunkedCheck check =
        CheckOf(PayloadKind::kUnsignedTrailer, 3000, *algorithm);
    ExpectSplitsAgree(check, body, &random);
    body[10] ^= 1;
    ExpectSplitsAgree(check, body, &random);
  }
}

TEST(ChunkedDecoderTest, SplitsAgreeOnEverySpoiledBody) {
  std::mt19937 random(13);
  for (auto kind : {PayloadKind::kSigned, PayloadKind::kSignedTrailer,
                    PayloadKind::kUnsignedTrailer}) {
    std::string body = Joined(Frames(kind, Bytes(150), 64));
    for (const std::string& spoiled : Spoiled(body)) {
      ExpectSplitsAgree(CheckOf(kind, 150), spoiled, &random);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(ChunkedDecoderTest, SplitsAgreeOnMalformedAndOversizedBodies) {
  std::mt19937 random(17);
  ChunkedCheck unsigned_check = CheckOf(PayloadKind::kUnsignedTrailer, 3);
  ChunkedCheck open_check =
      CheckOf(PayloadKind::kUnsignedTrailer, std::nullopt);
  std::string end =
      "0\r\nx-amz-checksum-crc32c:" + Base64Checksum(kCrc32c, "abc") +
      "\r\n\r\n";
  std::vector<std::pair<ChunkedCheck, std::string>> cases{
      {unsigned_check, "3\r\nabc\r\n" + end},
      {unsigned_check, "0003\r\nabc\r\n" + end},
      {unsigned_check, "00000000000000003\r\nabc\r\n" + end},
      {unsigned_check,
       "3;chunk-signature=" + std::string(64, 'a') + "\r\nabc\r\n" + end},
      {unsigned_check, "ffffffffffffffff\r\n"},
      {open_check, "ffffffffffffffff\r\nab"},
      {open_check, std::string(kMaxChunkLine + 100, '0')},
      {open_check, std::string(kMaxChunkLine + 1, '0') + "\r\n"},
      {open_check, std::string(kMaxChunkLine - 1, '0') + "3\r\nabc\r\n" + end},
      {CheckOf(PayloadKind::kUnsignedTrailer, 0),
       "0\r\nx-amz-checksum-crc32c:" + std::string(kMaxChunkLine, 'A') +
           "\r\n\r\n"},
      {CheckOf(PayloadKind::kSigned, 1),
       "1;chunk-signature=" + std::string(5000, 'a') + "\r\na\r\n"},
      {CheckOf(PayloadKind::kSigned, 1), "1\r\na\r\n"},
  };
  std::string aws = Joined(Frames(PayloadKind::kSigned, "abc", 64));
  for (std::uint64_t length : {0, 2, 4}) {
    cases.push_back({CheckOf(PayloadKind::kSigned, length), aws});
  }
  cases.push_back({CheckOf(PayloadKind::kSigned, 3), aws + "\r\n"});
  ChunkedCheck other_seed = CheckOf(PayloadKind::kSigned, 3);
  other_seed.seed_signature = std::string(64, '0');
  cases.push_back({other_seed, aws});
  for (const auto& [check, body] : cases) {
    ExpectSplitsAgree(check, body, &random);
    if (HasFatalFailure()) return;
  }
}

// The chunk after a forged one is never handed out: the signature is
// checked when the chunk's last byte arrives.
TEST(ChunkedDecoderTest, ForgedChunkStopsTheBodyBeforeTheNextChunk) {
  std::string data = Bytes(5000);
  std::vector<std::string> frames = Frames(PayloadKind::kSigned, data, 1000);
  ASSERT_EQ(frames.size(), 6u);
  std::size_t at = frames[2].find('=') + 1;
  frames[2][at] = frames[2][at] == '0' ? '1' : '0';
  BodyExpect expect;
  expect.content_sha256 = kStreamingPayload;
  expect.chunked = CheckOf(PayloadKind::kSigned, 5000);

  BodyCheck framewise(expect);
  std::string out;
  EXPECT_EQ(framewise.Feed(frames[0], &out), std::error_code());
  EXPECT_EQ(framewise.Feed(frames[1], &out), std::error_code());
  EXPECT_EQ(framewise.Feed(frames[2], &out), Errc::kChunkSignatureMismatch);
  EXPECT_EQ(out, data.substr(0, 2000));
  EXPECT_EQ(framewise.Feed(frames[3], &out), Errc::kChunkSignatureMismatch);
  EXPECT_EQ(framewise.Finish(), Errc::kChunkSignatureMismatch);
  EXPECT_EQ(out, data.substr(0, 2000));

  // Byte by byte: refused on chunk 3's last data byte, which (like every
  // byte of chunk 4) is never handed out.
  std::string body = Joined(frames);
  std::size_t last = frames[0].size() + frames[1].size() + frames[2].size() - 3;
  BodyCheck bytewise(expect);
  out.clear();
  for (std::size_t i = 0; i < body.size(); ++i) {
    std::error_code error = bytewise.Feed(body.substr(i, 1), &out);
    ASSERT_EQ(error,
              i < last ? std::error_code() : Errc::kChunkSignatureMismatch)
        << i;
  }
  EXPECT_EQ(out, data.substr(0, 2999));
}

TEST(ChunkedDecoderTest, MemoryDoesNotGrowWithTheChunk) {
  std::string data(4 << 20, 'x');
  for (std::size_t i = 0; i < data.size(); i += 4093) data[i] = char(i);
  std::string body = Joined(Frames(PayloadKind::kSigned, data, data.size()));
  BodyExpect expect;
  expect.content_sha256 = kStreamingPayload;
  expect.chunked = CheckOf(PayloadKind::kSigned, data.size());
  expect.headers = {{"x-amz-checksum-sha256",
                     Base64Checksum(ChecksumAlgorithm::kSha256, data)}};
  BodyCheck check(expect);
  Sha256 handed_out;
  std::size_t most = 0, total = 0;
  std::string out;
  for (std::size_t i = 0; i < body.size(); i += 64 << 10) {
    out.clear();
    ASSERT_EQ(check.Feed(std::string_view(body).substr(i, 64 << 10), &out),
              std::error_code());
    handed_out.Update(out);
    total += out.size();
    most = std::max(most, check.buffered());
  }
  EXPECT_EQ(check.Finish(), std::error_code());
  EXPECT_EQ(total, data.size());
  EXPECT_EQ(handed_out.HexDigest(), HexSha256(data));
  // The chunk's claimed signature, nothing of its data.
  EXPECT_LE(most, 64u);
  // A size line without its CRLF is held up to kMaxChunkLine, then refused.
  ChunkedDecoder lines(CheckOf(PayloadKind::kSigned, std::nullopt));
  std::string zeros(kMaxChunkLine + 1, '0');
  EXPECT_EQ(lines.Feed(zeros, &out), std::error_code());
  EXPECT_EQ(lines.buffered(), kMaxChunkLine + 1);
  EXPECT_EQ(lines.Feed("0", &out), Errc::kBadChunk);
}

TEST(ChunkedDecoderTest, TrailingChecksumAfterFinish) {
  ChunkedDecoder decoder(CheckOf(PayloadKind::kSignedTrailer, 3));
  std::string out;
  ASSERT_EQ(
      decoder.Feed(Joined(Frames(PayloadKind::kSignedTrailer, "abc", 2)), &out),
      std::error_code());
  EXPECT_EQ(decoder.checksum_algorithm(), std::nullopt);
  ASSERT_EQ(decoder.Finish(), std::error_code());
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(decoder.checksum_algorithm(), kCrc32c);
  EXPECT_EQ(decoder.checksum(), Base64Checksum(kCrc32c, "abc"));
  // Nothing may follow the end.
  EXPECT_EQ(decoder.Feed("", &out), std::error_code());
  EXPECT_EQ(decoder.Feed("x", &out), Errc::kBadChunk);
  EXPECT_EQ(out, "abc");
}

BodyExpect Plain(std::string_view content_sha256,
                 std::vector<Header> headers = {}) {
  BodyExpect expect;
  expect.content_sha256 = content_sha256;
  expect.headers = std::move(headers);
  return expect;
}

// "hello" fed a byte at a time; the error of its Finish.
std::error_code FeedHello(BodyExpect expect, std::string_view body = "hello") {
  BodyCheck check(std::move(expect));
  if (check.error()) return check.error();
  std::string out;
  for (char c : body) {
    EXPECT_EQ(check.Feed(std::string_view(&c, 1), &out), std::error_code());
  }
  EXPECT_EQ(out, body);
  EXPECT_EQ(check.buffered(), 0u);
  return check.Finish();
}

TEST(BodyCheckTest, PayloadHashIsCheckedAtFinish) {
  const std::string hash =
      "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
  EXPECT_EQ(FeedHello(Plain(hash)), std::error_code());
  EXPECT_EQ(FeedHello(Plain(hash), "hellO"), Errc::kPayloadHashMismatch);
  EXPECT_EQ(FeedHello(Plain(kEmptyPayloadHash)), Errc::kPayloadHashMismatch);
  EXPECT_EQ(FeedHello(Plain(kUnsignedPayload)), std::error_code());
  // A presigned URL's payload is unsigned whatever the header says.
  BodyExpect presigned = Plain(kEmptyPayloadHash);
  presigned.presigned = true;
  EXPECT_EQ(FeedHello(presigned), std::error_code());
  // Upper-case hex, another form, nothing: refused before any byte.
  for (std::string refused : {std::string(64, 'A'),
                              std::string("STREAMING-AWS4-ECDSA-P256-SHA256-"
                                          "PAYLOAD"),
                              std::string()}) {
    EXPECT_EQ(BodyCheck(Plain(refused)).error(), Errc::kUnsupportedPayload)
        << refused;
  }
}

TEST(BodyCheckTest, ChecksumHeaderAndContentMd5AreCheckedAtFinish) {
  const Header crc{"X-Amz-Checksum-Crc32c", " 4waSgw== "};
  const Header md5{"Content-MD5", "JfnnlDI7RTiF9RgfG2JNCw=="};
  auto feed = [](std::vector<Header> headers, std::string_view body) {
    return FeedHello(Plain(kUnsignedPayload, std::move(headers)), body);
  };
  EXPECT_EQ(feed({crc, md5}, "123456789"), std::error_code());
  EXPECT_EQ(feed({crc}, "123456780"), Errc::kChecksumMismatch);
  EXPECT_EQ(feed({md5}, "123456780"), Errc::kChecksumMismatch);
  const Header type{"x-amz-checksum-type", "COMPOSITE"};
  EXPECT_EQ(feed({type}, "x"), std::error_code());
  // The payload hash is reported first.
  EXPECT_EQ(FeedHello(Plain(kEmptyPayloadHash, {crc, md5}), "123456780"),
            Errc::kPayloadHashMismatch);
  // Refused before any byte.
  EXPECT_EQ(
      BodyCheck(Plain(kUnsignedPayload, {crc, {"x-amz-checksum-sha1", "AAAA"}}))
          .error(),
      Errc::kChecksumConflict);
  EXPECT_EQ(BodyCheck(Plain(kUnsignedPayload, {md5, md5})).error(),
            Errc::kMalformed);
  const Header bad_md5{"content-md5", "not base64"};
  EXPECT_EQ(BodyCheck(Plain(kUnsignedPayload, {bad_md5})).error(),
            Errc::kMalformed);
}

TEST(BodyCheckTest, AwsChunkedBodyIsDecodedAndItsHeadersChecked) {
  std::string data = Bytes(3000);
  // An MD5 of the right length that is not the data's.
  const Header md5{"Content-MD5", "JfnnlDI7RTiF9RgfG2JNCw=="};
  BodyExpect expect = Plain(kStreamingUnsignedTrailer, {md5});
  // Its kind is x-amz-content-sha256's: unsigned.
  expect.chunked = CheckOf(PayloadKind::kSignedTrailer, 3000);
  BodyCheck check(expect);
  std::string out;
  EXPECT_EQ(
      check.Feed(Joined(Frames(PayloadKind::kUnsignedTrailer, data, 1024)),
                 &out),
      std::error_code());
  EXPECT_EQ(out, data);
  EXPECT_EQ(check.Finish(), Errc::kChecksumMismatch);
  // The decoder's own refusals come at once.
  expect.chunked.trailer_header = "x-amz-checksum-md5";
  EXPECT_EQ(BodyCheck(expect).error(), Errc::kUnsupportedChecksum);
  expect.chunked.trailer_header = "";
  EXPECT_EQ(BodyCheck(expect).error(), Errc::kMissingChecksum);
}

}  // namespace
}  // namespace fencepost::sigv4
