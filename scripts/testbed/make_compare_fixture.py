#!/usr/bin/env python3
"""Writes tests/compare-data/compare-1200.json: a SQuAD 2.0 file of 1200 questions on
288 short made-up paragraphs (one 384-piece window each), for the statistics of
`bertqa compare` (paired bootstrap, McNemar, sign-flip randomization) against the
`oracle` and its lossy twins `oracle-lossy-1`, `oracle-lossy-2`, the only models that
load tests/compare-data/ (their `datasets` parameter). 1200 questions, so that a
bootstrap mean of 0/1 scores moves in steps of 1/12 point, finer than the 0.3-point
tolerance of the tests that compare two bootstraps' intervals; kept out of
tests/fixtures/, which every oracle-kind model tokenizes at start-up.

Every text is built here from word lists and arithmetic on the paragraph's number: no
randomness, no third-party text, so the output is the same bytes on every run. Three
kinds of paragraph (a town, a ship, an instrument), 96 of each, four answerable
questions each; every sixth paragraph adds one unanswerable question (48 in all). Each
paragraph names its own entity (made-up names, all distinct), so no two questions are
alike; answers are whole words of their
context (whole sequences of word pieces, as the oracle needs for 100 EM).

The oracle keys the gold answers by the question's token ids: a question of this file
with the same text as a question of another SQuAD file the oracle loads (data/,
tests/fixtures/ and tests/compare-data/) would merge their answers. The script refuses
to write when a question collides, case, accents and whitespace aside, with one of those
files' or another of its own.

Python 3 standard library only. Run from anywhere:
    python3 scripts/testbed/make_compare_fixture.py [--check]
(--check: write nothing, fail when the committed file differs from what would be written)
"""
import glob
import json
import os
import sys
import unicodedata

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "tests", "compare-data", "compare-1200.json")
# The directories of SQuAD files that oracle, oracle-lossy-1 and oracle-lossy-2 load
# (their `datasets` parameter).
LOADED = ("data", os.path.join("tests", "fixtures"), os.path.join("tests", "compare-data"))
PER_KIND = 96

SYL1 = ["Bal", "Cor", "Dun", "Esk", "Fal", "Gar", "Hol", "Kel", "Lor", "Mar", "Nor",
        "Pel", "Ros", "Sel", "Tor", "Vel", "Wen", "Ast", "Bry", "Cal", "Dar", "Fen",
        "Har", "Lin", "Mor", "Ost", "Pen", "Rad", "Sam", "Tal", "Ulb", "Wal", "Yar",
        "Ash", "Bel", "Cra"]
SYL2 = ["brook", "ford", "ham", "mere", "stead", "wick", "ton", "by", "field", "moor",
        "dale", "holm", "thorpe", "well"]
FIRST = ["Agnes", "Bernard", "Clara", "Desmond", "Edith", "Felix", "Greta", "Hugo",
         "Ida", "Jonas", "Katrin", "Leopold", "Martha", "Nils", "Olive", "Piotr", "Rosa",
         "Silas", "Tilda", "Viktor", "Wilma", "Yusuf", "Zelda"]
LAST = ["Abernethy", "Blackwood", "Carrow", "Dunmore", "Ellery", "Farrant", "Gillespie",
        "Hartigan", "Inchbald", "Jessop", "Kinnaird", "Lovell", "Mortlake", "Nettleton",
        "Oakeshott", "Penhaligon", "Quarrie", "Rendall", "Stirrup", "Trelawney", "Upjohn",
        "Vosper", "Whitlock"]
RIVERS = ["Aln", "Brue", "Calder", "Dove", "Eden", "Frome", "Garry", "Hodder", "Isla",
          "Kennet", "Lune", "Mole", "Nidd", "Otter", "Parrett", "Rother", "Severn", "Tamar",
          "Ure", "Wharfe", "Yarrow"]
PRODUCTS = ["woollen cloth", "copper kettles", "rope and sailcloth", "clay pipes",
            "pewter tankards", "leather saddles", "glass bottles", "iron nails",
            "linen thread", "oak barrels", "paper", "cheese", "salted herring",
            "roof slates", "candles", "straw hats", "felt", "bricks", "gunpowder"]
DIRECTIONS = ["north", "south", "east", "west", "north-east", "south-west"]
SHIP_KINDS = ["three-masted barque", "brigantine", "paddle steamer", "schooner",
              "steam collier", "clipper", "ketch"]
CARGOES = ["coal", "timber", "tea", "grain", "wool", "granite", "salt", "wine",
           "cotton", "sugar", "china clay", "whale oil", "copper ore"]
PORTS = ["Callen Head", "Marrowby", "Port Essel", "Kingsreach", "Saltmouth", "Dunhaven",
         "Greyquay", "Westerloe", "Ardmuir", "Fennick"]
CAPES = ["Skerry Point", "the Mardle Rocks", "Gull Ness", "Black Tor Head",
         "the Hollin Sands", "Raven Scar", "Cape Orrin"]
DEVICES = ["recorder", "meter", "scope", "gauge", "graph", "balance"]
QUANTITIES = [("humidity", "a strand of human hair"), ("wind speed", "four spinning cups"),
              ("air pressure", "a sealed tin capsule"), ("soil moisture", "two brass probes"),
              ("rainfall", "a tipping bucket"), ("tidal height", "a float in a stilling well"),
              ("sunshine", "a glass sphere that scorches a card"),
              ("river flow", "a small propeller on a rod")]
INSTITUTIONS = ["Observatory", "Polytechnic", "Botanic Garden", "Naval Academy",
                "Agricultural College", "Royal Infirmary"]


def name(i):
    """The i-th made-up place name (unique for i < 504: with i = 36a + b, the second
    syllable's index is 11a + 3b modulo 14, and 11 is prime to 14). Towns take 0-95,
    ships 100-195, shipyards 200-295, instruments 300-395, their places 400-495."""
    return SYL1[i % len(SYL1)] + SYL2[(i * 3 + i // len(SYL1)) % len(SYL2)]


def person(i):
    return f"{FIRST[(i * 5) % len(FIRST)]} {LAST[(i * 7 + 3) % len(LAST)]}"


def qa(context, qid, question, answer):
    entry = {"id": qid, "question": question}
    if answer is None:
        entry["answers"] = []
        entry["is_impossible"] = True
        return entry
    # The first occurrence that is whole words of the context, not part of a longer one.
    start = -1
    while True:
        start = context.index(answer, start + 1)
        before = context[start - 1] if start else " "
        end = start + len(answer)
        after = context[end] if end < len(context) else " "
        if not before.isalnum() and not after.isalnum():
            break
    entry["answers"] = [{"text": answer, "answer_start": start}]
    entry["is_impossible"] = False
    return entry


def town(k):
    t = name(k)
    founder, year = person(k), 1100 + (k * 37) % 700
    river, product = RIVERS[k % len(RIVERS)], PRODUCTS[(k * 5) % len(PRODUCTS)]
    miles, direction = 4 + (k * 11) % 40, DIRECTIONS[k % len(DIRECTIONS)]
    city = PORTS[(k * 3) % len(PORTS)]
    context = (f"{t} is a small town on the river {river}, {miles} miles {direction} of "
               f"{city}. It was founded in {year} by {founder}, who built a mill beside the "
               f"ford. For two centuries its workshops were known for {product}, which "
               f"carters took to the markets of the coast.")
    qas = [
        qa(context, f"town-{k:02d}-1", f"In what year was {t} founded?", str(year)),
        qa(context, f"town-{k:02d}-2", f"Who founded the town of {t}?", founder),
        qa(context, f"town-{k:02d}-3", f"On which river does {t} stand?", river),
        qa(context, f"town-{k:02d}-4", f"What were the workshops of {t} known for?", product),
    ]
    return t, context, qas


def ship(k):
    s = name(k + 100)
    kind, yard = SHIP_KINDS[k % len(SHIP_KINDS)], name(k + 200)
    designer, year = person(k + 40), 1780 + (k * 13) % 120
    cargo, a, b = CARGOES[(k * 3) % len(CARGOES)], PORTS[k % len(PORTS)], PORTS[(k + 4) % len(PORTS)]
    cape, lost = CAPES[k % len(CAPES)], year + 6 + (k * 7) % 30
    context = (f"The {s} was a {kind} launched at {yard} in {year}. She was designed by "
               f"{designer} and carried {cargo} between {a} and {b} until she was wrecked "
               f"off {cape} in {lost}. Her bell now hangs in the harbour chapel.")
    qas = [
        qa(context, f"ship-{k:02d}-1", f"Where was the {s} launched?", yard),
        qa(context, f"ship-{k:02d}-2", f"Who designed the {s}?", designer),
        qa(context, f"ship-{k:02d}-3", f"What cargo did the {s} carry?", cargo),
        qa(context, f"ship-{k:02d}-4", f"In which year was the {s} wrecked?", str(lost)),
    ]
    return s, context, qas


def instrument(k):
    d = name(k + 300) + " " + DEVICES[k % len(DEVICES)]
    quantity, means = QUANTITIES[k % len(QUANTITIES)]
    inventor, year = person(k + 80), 1820 + (k * 17) % 150
    inst, place = INSTITUTIONS[k % len(INSTITUTIONS)], name(k + 400)
    context = (f"The {d} is an instrument that measures {quantity} by means of {means}. "
               f"{inventor} built the first one in {year} at the {inst} of {place}, and "
               f"copies were soon sold to weather stations across the country.")
    qas = [
        qa(context, f"instrument-{k:02d}-1", f"What does the {d} measure?", quantity),
        qa(context, f"instrument-{k:02d}-2", f"Who built the first {d}?", inventor),
        qa(context, f"instrument-{k:02d}-3", f"When was the first {d} built?", str(year)),
        qa(context, f"instrument-{k:02d}-4", f"How does the {d} work?", means),
    ]
    return d, context, qas


UNANSWERABLE = {
    "town": "How many people lived in {} in the year 1900?",
    "ship": "Who was the captain of the {} when she was wrecked?",
    "instrument": "How much did one {} cost?",
}


def build():
    articles = []
    n = 0
    for kind, make in (("town", town), ("ship", ship), ("instrument", instrument)):
        paragraphs = []
        for k in range(PER_KIND):
            entity, context, qas = make(k)
            if n % 6 == 5:
                qas.append(qa(context, f"{kind}-{k:02d}-x", UNANSWERABLE[kind].format(entity), None))
            paragraphs.append({"context": context, "qas": qas})
            n += 1
        articles.append({"title": f"Compare fixture: {kind}s", "paragraphs": paragraphs})
    return {"version": "v2.0", "data": articles}


def norm(question):
    """A question as the uncased tokenizer sees it, more or less: no case, accents or
    whitespace."""
    s = unicodedata.normalize("NFD", question.lower())
    return "".join(c for c in s if not c.isspace() and unicodedata.category(c) != "Mn")


def other_questions():
    """The normalized questions of every other SQuAD file the oracle loads."""
    out = {}
    for d in LOADED:
        for path in sorted(glob.glob(os.path.join(ROOT, d, "**", "*.json"), recursive=True)):
            if os.path.abspath(path) == OUT:
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    articles = json.load(f)["data"]
                for article in articles:
                    for para in article.get("paragraphs", []):
                        for q in para.get("qas", []):
                            out.setdefault(norm(q.get("question", "")), path)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # not a SQuAD file
    return out


def main():
    names = [name(i) for i in range(504)]
    assert len(set(names)) == len(names), "made-up names repeat"
    data = build()
    questions = [q for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    seen, others = {}, other_questions()
    for q in questions:
        key = norm(q["question"])
        if key in seen:
            sys.exit(f"question {q['id']} repeats {seen[key]}: {q['question']!r}")
        if key in others:
            sys.exit(f"question {q['id']} is also in {others[key]}: {q['question']!r}")
        seen[key] = q["id"]
    text = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{OUT} differs from what {sys.argv[0]} writes")
        print(f"{OUT}: up to date")
        return
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    impossible = sum(1 for q in questions if q["is_impossible"])
    print(f"wrote {OUT}: {len(questions)} questions ({impossible} unanswerable), "
          f"{len(data['data'][0]['paragraphs']) * 3} paragraphs, {len(text)} bytes")


if __name__ == "__main__":
    main()
