"""Writes the test bed's tokenizers of the BERT family's other QA models, each folder
exactly as transformers' `save_pretrained` writes a fast tokenizer (tokenizer.json,
tokenizer_config.json, special_tokens_map.json), under tests/fixtures/tokenizers/:

- distilbert/  DistilBertTokenizerFast built from the REAL bert-base-uncased vocabulary
               (vocab/vocab.txt, `scripts/install_vocab.sh`), lower-case: the tokenizer
               of distilbert-base-uncased.
- roberta/     byte-level BPE in RoBERTa's shape (<s>=0 <pad>=1 </s>=2 <unk>=3 <mask>=4,
               ByteLevel pre-tokenizer without prefix space, RobertaProcessing with
               trim_offsets, so pairs are `<s> q </s></s> c </s>` and offsets exclude the
               space before a word), RobertaTokenizerFast. Trained by the `tokenizers`
               library's BpeTrainer; merges need a pair seen twice, so words seen once
               stay split into several pieces, as rare words are in the real vocabulary.
- deberta-v3/  a SentencePiece Unigram model in DeBERTa-v3's shape ([PAD]=0 [CLS]=1
               [SEP]=2 [UNK]=3, [MASK] last; nmt_nfkc), trained by `sentencepiece` and
               converted by transformers' DebertaV2Converter as the real spm.model is
               (Strip + Precompiled + Replace(" {2,}", " ") normalizer, Metaspace "▁" with
               prepend_scheme "always", `[CLS] A [SEP] B [SEP]` with type ids 0/1),
               DebertaV2TokenizerFast. Its offsets include the space before a word, as the
               real one's do (a piece "▁word" starts at the space; a lone "▁" is a token
               covering only the space).

roberta/ and deberta-v3/ are NOT those models' real vocabularies: they are trained here,
offline, on the text this repository holds (the contexts and questions of data/*.json
and tests/fixtures/squad/*.json, files in sorted order, each paragraph's context then its
questions), in each family's shape, so that tests exercise the family's normalization,
pre-tokenization, offsets and special-token layout without downloading anything. That
text is small: the vocabularies stop well below VOCAB_SIZE, at what it gives.
Every model_max_length is 512.

The output is deterministic (single-threaded training, a fixed seed; run twice, same
bytes; the tokenizers library's own Unigram trainer was not: its scores changed between
runs, hence sentencepiece).

usage: RUNQA_PYTHON scripts/testbed/train_tokenizers.py [--out DIR]
       (RUNQA_PYTHON: the python printed by scripts/testbed/setup_runqa_venv.sh)
"""
import os

# Before tokenizers is imported: single-threaded, so that nothing depends on the order
# in which threads finish.
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import DebertaV2TokenizerFast, DistilBertTokenizerFast, RobertaTokenizerFast  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VOCAB_SIZE = 4000
SEED = 20241202
MAX_LENGTH = 512
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def corpus():
    """The training text, in a fixed order: one string per context and per question."""
    paths = sorted(glob.glob(os.path.join(ROOT, "data", "*.json")))
    paths += sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "squad", "*.json")))
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        for article in data["data"]:
            for para in article["paragraphs"]:
                out.append(para["context"])
                out.extend(qa["question"] for qa in para["qas"])
    return out


def distilbert():
    vocab = os.path.join(ROOT, "vocab", "vocab.txt")
    if not os.path.isfile(vocab):
        sys.exit(f"{vocab} missing: run scripts/install_vocab.sh")
    return DistilBertTokenizerFast(vocab_file=vocab, do_lower_case=True, model_max_length=MAX_LENGTH)


def roberta(text):
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text, trainer=trainer)
    for i, s in enumerate(specials):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", 2), cls=("<s>", 0),
                                                      trim_offsets=True, add_prefix_space=False)
    return RobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                add_prefix_space=False, trim_offsets=True, model_max_length=MAX_LENGTH)


def deberta_v3(text, tmp):
    # A SentencePiece Unigram model (as DeBERTa-v3's spm.model is one: nmt_nfkc
    # normalization, a dummy prefix "▁", [PAD] [CLS] [SEP] [UNK] first), converted by
    # transformers' DebertaV2Converter into the fast tokenizer exactly as the real
    # model's spm.model is: Strip + Precompiled(nmt_nfkc) + Replace(" {2,}", " "),
    # Metaspace(prepend_scheme "always"), [MASK] added after the pieces.
    import sentencepiece as spm
    spm.set_random_generator_seed(SEED)
    model = os.path.join(tmp, "spm.model")
    with open(model, "wb") as f:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text), model_writer=f, model_type="unigram", vocab_size=VOCAB_SIZE,
            hard_vocab_limit=False,  # the corpus is small: as many pieces as it gives, up to VOCAB_SIZE
            character_coverage=1.0, byte_fallback=False, normalization_rule_name="nmt_nfkc",
            pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]",
            unk_id=3, unk_piece="[UNK]", num_threads=1, max_sentence_length=1 << 20, minloglevel=2)
    return DebertaV2TokenizerFast(vocab_file=model, do_lower_case=False, split_by_punct=False,
                                  model_max_length=MAX_LENGTH)


def save(tokenizer, out):
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    # legacy_format=False: the fast files only (no vocab.txt / vocab.json / spm.model).
    written = tokenizer.save_pretrained(tmp, legacy_format=False)
    names = sorted(os.path.basename(p) for p in written)
    assert names == sorted(FILES), names
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizers"))
    a = ap.parse_args()
    text = corpus()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("distilbert", distilbert), ("roberta", lambda: roberta(text)),
                           ("deberta-v3", lambda: deberta_v3(text, tmp))):
            tok = make()
            save(tok, os.path.join(a.out, name))
            print(f"{name}: {len(tok)} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
