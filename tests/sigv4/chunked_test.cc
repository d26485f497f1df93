// Decoding aws-chunked bodies: AWS's two worked examples ("Transferring
// Payload in Multiple Chunks" and "... Including Trailing Headers", 64 KiB
// and 1 KiB of 'a', the published seed, chunk and trailer signatures),
// bodies built here with ChunkSigner, bodies botocore's AwsChunkedWrapper
// wrote (tests/fixtures/sigv4/botocore_aws_chunked), and each way a body can
// be forged, cut or malformed, refused with its own error.
#include "sigv4/chunked.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sigv4/crypto.h"
#include "sigv4/errc.h"

namespace fencepost::sigv4 {
namespace {

constexpr char kAmzDate[] = "20130524T000000Z";
const Scope kScope{"20130524", "us-east-1", "s3"};
const Secret kKey =
    SigningKey(Secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), kScope);

// The published signatures of the two examples.
constexpr char kSeed[] =
    "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
const std::vector<std::string> kChunkSignatures{
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"};
constexpr char kTrailerSeed[] =
    "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";
const std::vector<std::string> kTrailerChunkSignatures{
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992"};
constexpr char kTrailerSignature[] =
    "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435";

ChunkedCheck Check(PayloadKind kind, std::string seed,
                   std::optional<std::uint64_t> length,
                   std::string trailer = "") {
  return {kind,  kKey, kAmzDate, kScope, std::move(seed), std::move(trailer),
          length};
}

// "<hex size>;chunk-signature=<sig>\r\n<data>\r\n" for each (size,
// signature), the data 'a's, the final chunk's data-less.
std::string ExampleChunks(const std::vector<std::string>& signatures) {
  std::string body = ChunkHeader(65536, signatures[0]);
  body.append(65536, 'a').append("\r\n");
  body.append(ChunkHeader(1024, signatures[1]));
  body.append(1024, 'a').append("\r\n");
  body.append(ChunkHeader(0, signatures[2]));
  return body;
}

// `data` in chunks of `chunk_size`, signed in a chain from `seed` (or
// unsigned), the final chunk, and for the trailer kinds the checksum
// trailer (and its signature); "\r\n" at the end.
std::string Encode(std::string_view data, std::size_t chunk_size,
                   PayloadKind kind, std::string_view seed = kSeed,
                   ChecksumAlgorithm algorithm = ChecksumAlgorithm::kCrc32c) {
  ChunkSigner signer(kKey, kAmzDate, kScope, std::string(seed));
  bool signed_kind = kind != PayloadKind::kUnsignedTrailer;
  std::string body, last;
  auto chunk = [&](std::string_view piece) {
    if (signed_kind) {
      last = signer.Next(piece);
      body.append(ChunkHeader(piece.size(), last));
    } else {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%zx", piece.size());
      body.append(hex).append("\r\n");
    }
    if (!piece.empty()) body.append(piece).append("\r\n");
  };
  for (std::size_t i = 0; i < data.size(); i += chunk_size) {
    chunk(data.substr(i, chunk_size));
  }
  chunk("");
  if (kind != PayloadKind::kSigned) {
    std::string line = std::string(ChecksumHeaderName(algorithm)) + ":" +
                       Base64Checksum(algorithm, data);
    body.append(line).append("\r\n");
    if (signed_kind) {
      body.append("x-amz-trailer-signature:")
          .append(Signature(
              kKey, TrailerStringToSign(kAmzDate, kScope, last, line + "\n")))
          .append("\r\n");
    }
  }
  return body.append("\r\n");
}

// Bytes that include CR, LF, ';' and ':' (what framing must not trip on).
std::string Data(std::size_t size) {
  std::string data(size, '\0');
  for (std::size_t i = 0; i < size; ++i) data[i] = char((i * 7 + 3) % 256);
  return data;
}

std::error_code Decode(std::string_view body, const ChunkedCheck& check,
                       std::string* data = nullptr) {
  ChunkedBody out;
  std::error_code ec = DecodeAwsChunked(body, check, &out);
  if (data != nullptr) *data = out.data;
  return ec;
}

TEST(ChunkedTest, KindsByContentSha256) {
  EXPECT_EQ(StreamingPayloadKind("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            PayloadKind::kSigned);
  EXPECT_EQ(StreamingPayloadKind("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"),
            PayloadKind::kSignedTrailer);
  EXPECT_EQ(StreamingPayloadKind("STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
            PayloadKind::kUnsignedTrailer);
  EXPECT_EQ(StreamingPayloadKind("UNSIGNED-PAYLOAD"), std::nullopt);
  EXPECT_EQ(StreamingPayloadKind(kEmptyPayloadHash), std::nullopt);
  EXPECT_EQ(StreamingPayloadKind("STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD"),
            std::nullopt);
}

TEST(ChunkedTest, AwsMultipleChunksExampleDecodes) {
  std::string body = ExampleChunks(kChunkSignatures) + "\r\n";
  EXPECT_EQ(body.size(), ChunkedContentLength(66560, 65536));
  std::string data;
  ASSERT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 66560), &data),
            std::error_code());
  EXPECT_EQ(data, std::string(66560, 'a'));
  // Any other seed (another request's signature) breaks the chain.
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kTrailerSeed, 66560)),
            Errc::kChunkSignatureMismatch);
}

TEST(ChunkedTest, AwsTrailingHeaderExampleDecodes) {
  std::string canonical = "x-amz-checksum-crc32c:sOO8/Q==\n";
  EXPECT_EQ(Signature(kKey, TrailerStringToSign(kAmzDate, kScope,
                                                kTrailerChunkSignatures[2],
                                                canonical)),
            kTrailerSignature);
  EXPECT_EQ(TrailerStringToSign(kAmzDate, kScope, "prev", canonical),
            "AWS4-HMAC-SHA256-TRAILER\n20130524T000000Z\n"
            "20130524/us-east-1/s3/aws4_request\nprev\n" +
                HexSha256(canonical));
  ChunkedCheck check = Check(PayloadKind::kSignedTrailer, kTrailerSeed, 66560,
                             "x-amz-checksum-crc32c");
  std::string trailer =
      "x-amz-checksum-crc32c:sOO8/Q==\r\n"
      "x-amz-trailer-signature:" +
      std::string(kTrailerSignature) + "\r\n";
  // As HTTP's chunked grammar (and the SDKs) lay it out, and as AWS's
  // documentation shows it (the empty line before the trailer).
  for (const std::string& body :
       {ExampleChunks(kTrailerChunkSignatures) + trailer + "\r\n",
        ExampleChunks(kTrailerChunkSignatures) + "\r\n" + trailer}) {
    ChunkedBody out;
    ASSERT_EQ(DecodeAwsChunked(body, check, &out), std::error_code());
    EXPECT_EQ(out.data, std::string(66560, 'a'));
    EXPECT_EQ(out.checksum_algorithm, ChecksumAlgorithm::kCrc32c);
    EXPECT_EQ(out.checksum, "sOO8/Q==");
  }
  // The checksum is signed: another value is a forged trailer.
  std::string forged = ExampleChunks(kTrailerChunkSignatures) +
                       "x-amz-checksum-crc32c:sOO8/A==\r\n"
                       "x-amz-trailer-signature:" +
                       kTrailerSignature + "\r\n\r\n";
  EXPECT_EQ(Decode(forged, check), Errc::kChunkSignatureMismatch);
}

TEST(ChunkedTest, EncodedHereDecodesForEveryKindAndAlgorithm) {
  for (std::size_t size : {0, 1, 100, 8192, 20000}) {
    std::string data = Data(size);
    std::string body = Encode(data, 8192, PayloadKind::kSigned);
    std::string decoded;
    EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, size), &decoded),
              std::error_code());
    EXPECT_EQ(decoded, data);
    if (size > 0) {
      EXPECT_EQ(body.size(), ChunkedContentLength(size, 8192));
    }
    for (auto algorithm :
         {ChecksumAlgorithm::kCrc32, ChecksumAlgorithm::kCrc32c,
          ChecksumAlgorithm::kCrc64Nvme, ChecksumAlgorithm::kSha1,
          ChecksumAlgorithm::kSha256}) {
      std::string trailer(ChecksumHeaderName(algorithm));
      for (auto kind :
           {PayloadKind::kSignedTrailer, PayloadKind::kUnsignedTrailer}) {
        body = Encode(data, 8192, kind, kSeed, algorithm);
        ChunkedBody out;
        EXPECT_EQ(
            DecodeAwsChunked(body, Check(kind, kSeed, size, trailer), &out),
            std::error_code())
            << trailer << " " << size;
        EXPECT_EQ(out.data, data);
        EXPECT_EQ(out.checksum, Base64Checksum(algorithm, data));
      }
    }
  }
}

TEST(ChunkedTest, UndeclaredLengthDecodesAnyLength) {
  std::string data = Data(5000);
  std::string decoded;
  EXPECT_EQ(Decode(Encode(data, 1000, PayloadKind::kUnsignedTrailer),
                   Check(PayloadKind::kUnsignedTrailer, "", std::nullopt,
                         "x-amz-checksum-crc32c"),
                   &decoded),
            std::error_code());
  EXPECT_EQ(decoded, data);
}

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(FENCEPOST_SIGV4_FIXTURES) +
                       "/botocore_aws_chunked/" + name + ".body",
                   std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::stringstream body;
  body << in.rdbuf();
  return body.str();
}

// What boto3 sends by default since 1.36 (STREAMING-UNSIGNED-PAYLOAD-
// TRAILER), written by Debian's botocore (1.29) AwsChunkedWrapper: 3000
// bytes in chunks of 1024, "0\r\n", the checksum trailer, "\r\n".
TEST(ChunkedTest, BotocoreUnsignedTrailerBodiesDecode) {
  std::string data = Data(3000);
  for (const char* name : {"crc32", "crc32c", "sha1", "sha256"}) {
    std::string body = Fixture(name);
    std::string header = std::string("x-amz-checksum-") + name;
    ChunkedBody out;
    ASSERT_EQ(
        DecodeAwsChunked(
            body, Check(PayloadKind::kUnsignedTrailer, "", 3000, header), &out),
        std::error_code())
        << name;
    EXPECT_EQ(out.data, data) << name;
    EXPECT_EQ(out.checksum,
              Base64Checksum(*ChecksumFromHeaderName(header), data));
    // One byte of data changed: the checksum no longer matches.
    body[10] ^= 1;
    EXPECT_EQ(
        Decode(body, Check(PayloadKind::kUnsignedTrailer, "", 3000, header)),
        Errc::kChecksumMismatch)
        << name;
  }
}

TEST(ChunkedTest, FlippedDataByteIsRefused) {
  std::string body = ExampleChunks(kChunkSignatures) + "\r\n";
  body[100] = 'b';
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 66560)),
            Errc::kChunkSignatureMismatch);
  std::string unsigned_body =
      Encode(Data(3000), 1024, PayloadKind::kUnsignedTrailer);
  unsigned_body[2000] ^= 0x40;
  EXPECT_EQ(Decode(unsigned_body, Check(PayloadKind::kUnsignedTrailer, "", 3000,
                                        "x-amz-checksum-crc32c")),
            Errc::kChecksumMismatch);
}

TEST(ChunkedTest, WrongChunkSignaturesAreRefused) {
  ChunkedCheck check = Check(PayloadKind::kSigned, kSeed, 66560);
  std::vector<std::string> wrong_first = kChunkSignatures;
  wrong_first[0][5] = wrong_first[0][5] == '0' ? '1' : '0';
  EXPECT_EQ(Decode(ExampleChunks(wrong_first) + "\r\n", check),
            Errc::kChunkSignatureMismatch);
  // The final empty chunk's signature is checked too (Ceph RGW 16.2 does
  // not): without it, a body cut after any chunk would pass.
  std::vector<std::string> wrong_final = kChunkSignatures;
  wrong_final[2] = std::string(64, '0');
  EXPECT_EQ(Decode(ExampleChunks(wrong_final) + "\r\n", check),
            Errc::kChunkSignatureMismatch);
  // Swapped: each signature is right, in the wrong place.
  std::vector<std::string> swapped = kChunkSignatures;
  std::swap(swapped[0], swapped[1]);
  EXPECT_EQ(Decode(ExampleChunks(swapped) + "\r\n", check),
            Errc::kChunkSignatureMismatch);
}

TEST(ChunkedTest, MissingOrMalformedChunkSignatureIsRefused) {
  ChunkedCheck check = Check(PayloadKind::kSigned, kSeed, 1);
  std::string sig = kChunkSignatures[0];
  for (const std::string& line :
       std::vector<std::string>{"1\r\n", "1;\r\n", "1;chunk-signature=\r\n",
                                "1;chunk-signature=" + sig.substr(1) + "\r\n",
                                "1;chunk-signature=" + sig + "0\r\n",
                                "1;Chunk-Signature=" + sig + "\r\n"}) {
    EXPECT_EQ(Decode(line + "a\r\n" + ChunkHeader(0, sig) + "\r\n", check),
              Errc::kChunkSignatureMismatch)
        << line;
  }
  // The final chunk without its signature: a body cut short and re-ended.
  std::string body = ExampleChunks(kChunkSignatures);
  body = body.substr(0, body.rfind("0;chunk-signature=")) + "0\r\n\r\n";
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 66560)),
            Errc::kChunkSignatureMismatch);
}

TEST(ChunkedTest, SignedTrailerForgeriesAreRefused) {
  std::string data = Data(3000);
  ChunkedCheck check =
      Check(PayloadKind::kSignedTrailer, kSeed, 3000, "x-amz-checksum-crc32c");
  std::string body = Encode(data, 1024, PayloadKind::kSignedTrailer);
  ASSERT_EQ(Decode(body, check), std::error_code());

  std::string wrong_signature = body;
  size_t at = wrong_signature.find("x-amz-trailer-signature:") + 30;
  wrong_signature[at] = wrong_signature[at] == 'a' ? 'b' : 'a';
  EXPECT_EQ(Decode(wrong_signature, check), Errc::kChunkSignatureMismatch);

  std::string no_signature = body;
  at = no_signature.find("x-amz-trailer-signature:");
  no_signature.erase(at, no_signature.find("\r\n", at) + 2 - at);
  EXPECT_EQ(Decode(no_signature, check), Errc::kChunkSignatureMismatch);

  // Without its checksum, signed as such: still refused.
  std::string no_checksum = body.substr(0, body.find("x-amz-checksum-crc32c:"));
  ChunkSigner signer(kKey, kAmzDate, kScope, kSeed);
  signer.Next(data.substr(0, 1024));
  signer.Next(data.substr(1024, 1024));
  signer.Next(data.substr(2048));
  std::string final_signature = signer.Next("");
  no_checksum += "x-amz-trailer-signature:" +
                 Signature(kKey, TrailerStringToSign(kAmzDate, kScope,
                                                     final_signature, "")) +
                 "\r\n\r\n";
  EXPECT_EQ(Decode(no_checksum, check), Errc::kMissingChecksum);

  // The signature before the checksum line, or a line after the signature.
  std::string after = body;
  after.insert(after.size() - 2, "x-amz-checksum-crc32c:AAAAAA==\r\n");
  EXPECT_EQ(Decode(after, check), Errc::kBadTrailer);
}

TEST(ChunkedTest, UnsignedTrailerChecksumMustBeThereAndRight) {
  std::string data = Data(3000);
  ChunkedCheck check =
      Check(PayloadKind::kUnsignedTrailer, "", 3000, "x-amz-checksum-crc32");
  std::string body = Encode(data, 1024, PayloadKind::kUnsignedTrailer, kSeed,
                            ChecksumAlgorithm::kCrc32);
  ASSERT_EQ(Decode(body, check), std::error_code());

  std::string chunks = body.substr(0, body.find("x-amz-checksum-crc32:"));
  EXPECT_EQ(Decode(chunks + "\r\n", check), Errc::kMissingChecksum);
  EXPECT_EQ(Decode(chunks + "x-amz-checksum-crc32:AAAAAA==\r\n\r\n", check),
            Errc::kChecksumMismatch);
  EXPECT_EQ(Decode(chunks + "x-amz-checksum-crc32:\r\n\r\n", check),
            Errc::kChecksumMismatch);
  // Another algorithm than the one announced, a repeated line, a stray one.
  std::string other = "x-amz-checksum-crc32c:" +
                      Base64Checksum(ChecksumAlgorithm::kCrc32c, data) + "\r\n";
  std::string right = "x-amz-checksum-crc32:" +
                      Base64Checksum(ChecksumAlgorithm::kCrc32, data) + "\r\n";
  EXPECT_EQ(Decode(chunks + other + "\r\n", check), Errc::kBadTrailer);
  EXPECT_EQ(Decode(chunks + right + right + "\r\n", check), Errc::kBadTrailer);
  EXPECT_EQ(Decode(chunks + right + "x-amz-meta-a:b\r\n\r\n", check),
            Errc::kBadTrailer);
  EXPECT_EQ(Decode(chunks + "no colon\r\n\r\n", check), Errc::kBadTrailer);
  EXPECT_EQ(Decode(chunks + ":value\r\n\r\n", check), Errc::kBadTrailer);
  // A signature where none is expected.
  EXPECT_EQ(Decode(chunks + right + "x-amz-trailer-signature:" +
                       std::string(64, '0') + "\r\n\r\n",
                   check),
            Errc::kBadTrailer);
  // Name in any case, blanks around the value: the same trailer.
  EXPECT_EQ(
      Decode(chunks + "X-Amz-Checksum-CRC32: " +
                 Base64Checksum(ChecksumAlgorithm::kCrc32, data) + "\t\r\n\r\n",
             check),
      std::error_code());
}

TEST(ChunkedTest, XAmzTrailerMustAnnounceOneKnownChecksum) {
  std::string body = Encode(Data(10), 1024, PayloadKind::kUnsignedTrailer);
  auto with = [&](std::string trailer) {
    return Decode(body, Check(PayloadKind::kUnsignedTrailer, "", 10, trailer));
  };
  EXPECT_EQ(with("x-amz-checksum-crc32c"), std::error_code());
  EXPECT_EQ(with(" X-Amz-Checksum-Crc32c ,"), std::error_code());
  EXPECT_EQ(with(""), Errc::kMissingChecksum);
  EXPECT_EQ(with(" , "), Errc::kMissingChecksum);
  EXPECT_EQ(with("x-amz-checksum-md5"), Errc::kUnsupportedChecksum);
  EXPECT_EQ(with("x-amz-meta-a"), Errc::kUnsupportedChecksum);
  EXPECT_EQ(with("x-amz-checksum-crc32c,x-amz-checksum-sha1"),
            Errc::kChecksumConflict);
}

TEST(ChunkedTest, LengthMustBeTheDeclaredOne) {
  std::string body = ExampleChunks(kChunkSignatures) + "\r\n";
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 66561)),
            Errc::kLengthMismatch);
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 66559)),
            Errc::kLengthMismatch);
  EXPECT_EQ(Decode(body, Check(PayloadKind::kSigned, kSeed, 0)),
            Errc::kLengthMismatch);
  // A huge size is refused before anything is read or allocated.
  EXPECT_EQ(
      Decode("ffffffffffffffff\r\n", Check(PayloadKind::kUnsignedTrailer, "",
                                           10, "x-amz-checksum-crc32")),
      Errc::kLengthMismatch);
  EXPECT_EQ(Decode("ffffffffffffffff\r\n",
                   Check(PayloadKind::kUnsignedTrailer, "", std::nullopt,
                         "x-amz-checksum-crc32")),
            Errc::kIncompleteBody);
}

TEST(ChunkedTest, EveryShortBodyIsRefused) {
  std::string data = Data(300);
  struct Case {
    PayloadKind kind;
    std::string trailer;
  };
  for (const Case& c :
       {Case{PayloadKind::kSigned, ""},
        Case{PayloadKind::kSignedTrailer, "x-amz-checksum-sha1"},
        Case{PayloadKind::kUnsignedTrailer, "x-amz-checksum-sha1"}}) {
    std::string body =
        Encode(data, 128, c.kind, kSeed, ChecksumAlgorithm::kSha1);
    ChunkedCheck check = Check(c.kind, kSeed, 300, c.trailer);
    ASSERT_EQ(Decode(body, check), std::error_code());
    for (std::size_t size = 0; size < body.size(); ++size) {
      std::error_code ec = Decode(body.substr(0, size), check);
      EXPECT_TRUE(ec) << "prefix of " << size << " of " << body.size();
    }
    // Cut on a line's end, the body is incomplete, not malformed.
    EXPECT_EQ(Decode(body.substr(0, body.find("\r\n") + 2), check),
              Errc::kIncompleteBody);
    EXPECT_EQ(Decode(body.substr(0, body.size() - 1), check),
              Errc::kIncompleteBody);
  }
}

TEST(ChunkedTest, EveryFlippedByteIsRefused) {
  std::string data = Data(200);
  for (auto kind : {PayloadKind::kSigned, PayloadKind::kSignedTrailer,
                    PayloadKind::kUnsignedTrailer}) {
    std::string body = Encode(data, 64, kind);
    ChunkedCheck check = Check(kind, kSeed, 200, "x-amz-checksum-crc32c");
    ASSERT_EQ(Decode(body, check), std::error_code());
    for (std::size_t i = 0; i < body.size(); ++i) {
      std::string flipped = body;
      flipped[i] ^= 1;
      EXPECT_TRUE(Decode(flipped, check))
          << "byte " << i << " of kind " << static_cast<int>(kind);
    }
  }
}

TEST(ChunkedTest, MalformedFramingIsRefused) {
  ChunkedCheck check =
      Check(PayloadKind::kUnsignedTrailer, "", 3, "x-amz-checksum-crc32c");
  std::string trailer = "x-amz-checksum-crc32c:" +
                        Base64Checksum(ChecksumAlgorithm::kCrc32c, "abc") +
                        "\r\n\r\n";
  ASSERT_EQ(Decode("3\r\nabc\r\n0\r\n" + trailer, check), std::error_code());
  ASSERT_EQ(Decode("1\r\na\r\n2\r\nbc\r\n0\r\n" + trailer, check),
            std::error_code());
  ASSERT_EQ(Decode("0003\r\nabc\r\n0\r\n" + trailer, check), std::error_code());
  for (const std::string& body : {
           "3;ext=1\r\nabc\r\n0\r\n" + trailer,  // an extension, unsigned
           " 3\r\nabc\r\n0\r\n" + trailer,       // blanks around the size
           "3 \r\nabc\r\n0\r\n" + trailer,
           "+3\r\nabc\r\n0\r\n" + trailer,
           "0x3\r\nabc\r\n0\r\n" + trailer,
           "\r\nabc\r\n0\r\n" + trailer,    // no size
           "3\nabc\r\n0\r\n" + trailer,     // LF alone
           "3\r\nabcX\r\n0\r\n" + trailer,  // data longer than said
           "3\r\nabc\n0\r\n" + trailer,     // no CRLF after data
           "00000000000000003\r\nabc\r\n0\r\n" + trailer,  // 17 digits
           "3\r\nabc\r\n0\r\n" + trailer + "x",  // garbage after the end
           "3\r\nabc\r\n0\r\n" + trailer + "\r\n",
       }) {
    EXPECT_EQ(Decode(body, check), Errc::kBadChunk) << body;
  }
  // kSigned ends with the final chunk's CRLF and nothing after it.
  std::string signed_body = Encode("abc", 64, PayloadKind::kSigned);
  ChunkedCheck signed_check = Check(PayloadKind::kSigned, kSeed, 3);
  ASSERT_EQ(Decode(signed_body, signed_check), std::error_code());
  EXPECT_EQ(Decode(signed_body + "\r\n", signed_check), Errc::kBadChunk);
  EXPECT_EQ(Decode(signed_body.substr(0, signed_body.size() - 2) + "xx",
                   signed_check),
            Errc::kBadChunk);
  EXPECT_EQ(Decode(signed_body + "x-amz-checksum-crc32c:AAAAAA==\r\n\r\n",
                   signed_check),
            Errc::kBadChunk);
}

TEST(ChunkedTest, LinesAreBounded) {
  ChunkedCheck check = Check(PayloadKind::kUnsignedTrailer, "", std::nullopt,
                             "x-amz-checksum-crc32c");
  // A size line longer than kMaxChunkLine, even with no CRLF in sight.
  EXPECT_EQ(Decode(std::string(kMaxChunkLine + 100, '0'), check),
            Errc::kBadChunk);
  EXPECT_EQ(Decode(std::string(kMaxChunkLine + 1, '0') + "\r\n", check),
            Errc::kBadChunk);
  std::string signed_line = "1;chunk-signature=" + std::string(5000, 'a');
  EXPECT_EQ(
      Decode(signed_line + "\r\na\r\n", Check(PayloadKind::kSigned, kSeed, 1)),
      Errc::kBadChunk);
  // A trailer line too.
  std::string big = "x-amz-checksum-crc32c:" + std::string(kMaxChunkLine, 'A');
  EXPECT_EQ(
      Decode("0\r\n" + big + "\r\n\r\n", Check(PayloadKind::kUnsignedTrailer,
                                               "", 0, "x-amz-checksum-crc32c")),
      Errc::kBadChunk);
}

}  // namespace
}  // namespace fencepost::sigv4
