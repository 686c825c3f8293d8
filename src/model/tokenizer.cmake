# Byte-level BPE and SentencePiece tokenizers (include/folio/model/tokenizer.h).
# Included from src/model/CMakeLists.txt, which adds these lists to
# folio_model and folio_model_tests.
# PCRE2 (libpcre2-dev) runs the pre-tokenizer's split regexes: they need
# lookahead and Unicode-aware matching, which std::regex lacks. Its Unicode
# tables are not used for classes (split_regex.h), and NFC comes from
# folio's own tables (unicode_tables.cc), so no ICU / utf8proc.
# GLOBAL: folio_model links it PUBLIC, so targets in other folders that link
# folio_model must see the imported target too.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)

set(FOLIO_TOKENIZER_SOURCES
    bpe_tokenizer.cc spm_tokenizer.cc tokenizer_common.cc tokenizer_spec.cc
    tokenizer_json.cc tokenizer_json_components.cc split_regex.cc unicode.cc
    unicode_tables.cc)
set(FOLIO_TOKENIZER_TESTS
    bpe_tokenizer_test.cc tokenizer_json_test.cc split_regex_test.cc)
set(FOLIO_TOKENIZER_DEPS PkgConfig::PCRE2)
