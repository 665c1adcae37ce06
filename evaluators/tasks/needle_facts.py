"""The facts the needle and passkey tasks plant (``evaluators.tasks.needle``), and whose they are.

Each needle template is a fact naming a person and the question that asks for it; the passkey
has one frame. The validation part draws from the first half of each list, the test part from the
second, so no needle template or name of one part appears in the other (a test holds this): a
search never tunes on the wording it is reported on.
"""

from __future__ import annotations

# (fact, question): LongEmbed's needles are statements a question asks back (Zhu et al. 2024, Sec. 3)
NEEDLE_TEMPLATES: tuple[tuple[str, str], ...] = (
    (
        "The best thing {name} ever cooked was a lemon risotto on a rainy Tuesday.",
        "What was the best thing {name} ever cooked?",
    ),
    ("{name} keeps a spare house key inside a hollow garden gnome.", "Where does {name} keep a spare house key?"),
    (
        "The first car {name} owned was a dented green hatchback bought for forty dollars.",
        "What was the first car {name} owned?",
    ),
    ("{name} learned to juggle from a street performer in Lisbon.", "Who taught {name} to juggle?"),
    ("The song {name} hums when nervous is an old sea shanty about whales.", "What song does {name} hum when nervous?"),
    ("{name}'s favourite place to read is the roof of a disused lighthouse.", "Where does {name} like to read?"),
    ("{name} once won a regional contest for carving pumpkins into owls.", "What contest did {name} once win?"),
    (
        "The secret ingredient in {name}'s chili is a spoonful of dark cocoa.",
        "What is the secret ingredient in {name}'s chili?",
    ),
    ("{name} is afraid of escalators but not of elevators.", "What is {name} afraid of?"),
    ("{name} named a pet tortoise after a famous astronomer.", "What did {name} name the pet tortoise after?"),
    ("The oldest thing {name} owns is a brass compass from a shipwreck.", "What is the oldest thing {name} owns?"),
    ("{name} walks to work every day along a canal lined with willows.", "How does {name} get to work?"),
    ("{name}'s lucky number is seventeen because of a childhood race.", "What is {name}'s lucky number?"),
    ("{name} collects postcards of bridges from every country visited.", "What does {name} collect?"),
    ("The language {name} is learning at night is Icelandic.", "Which language is {name} learning?"),
    ("{name} grows tomatoes on a balcony facing the railway station.", "What does {name} grow on the balcony?"),
    ("{name} broke a wrist falling off a unicycle at a wedding.", "How did {name} break a wrist?"),
    (
        "The only film {name} has watched twice in a cinema is about penguins.",
        "Which film has {name} watched twice in a cinema?",
    ),
    ("{name} drinks tea with a slice of ginger every morning at six.", "What does {name} drink every morning?"),
    ("{name} repaired the town clock tower without being paid.", "What did {name} repair for free?"),
    ("{name} sleeps with a window open even in the middle of winter.", "How does {name} sleep in winter?"),
    (
        "The painting above {name}'s fireplace shows a fox crossing a frozen river.",
        "What does the painting above {name}'s fireplace show?",
    ),
    ("{name} trained a crow to bring back bottle caps.", "What did {name} train a crow to do?"),
    ("{name}'s grandmother left behind a recipe book written in code.", "What did {name}'s grandmother leave behind?"),
    (
        "{name} once rowed across a lake at midnight to deliver a letter.",
        "Why did {name} row across a lake at midnight?",
    ),
    ("The instrument {name} plays badly but happily is the bassoon.", "Which instrument does {name} play?"),
    ("{name} keeps bees on the flat roof of a bakery.", "Where does {name} keep bees?"),
    ("{name}'s first job was sorting buttons in a coat factory.", "What was {name}'s first job?"),
    ("{name} refuses to eat anything coloured purple.", "What does {name} refuse to eat?"),
    (
        "The mountain {name} climbed last summer has a chapel at its summit.",
        "What is at the summit of the mountain {name} climbed?",
    ),
    ("{name} writes letters to a pen friend in Patagonia every month.", "Who does {name} write letters to?"),
    ("{name} built a telescope from plumbing pipes and an old lens.", "What did {name} build from plumbing pipes?"),
    (
        "{name} has a scar shaped like a crescent from a kitchen accident.",
        "Where did {name}'s crescent scar come from?",
    ),
    ("The board game {name} always wins is a Dutch game about canals.", "Which board game does {name} always win?"),
    (
        "{name} swims in the harbour on the first day of every year.",
        "What does {name} do on the first day of the year?",
    ),
    ("{name} once got lost for a day in a maze of sunflowers.", "Where did {name} get lost for a day?"),
    (
        "{name}'s bicycle has a bell that plays the opening of a symphony.",
        "What does the bell on {name}'s bicycle play?",
    ),
    (
        "The dessert {name} makes for birthdays is a tower of caramel choux.",
        "What dessert does {name} make for birthdays?",
    ),
    ("{name} keeps a diary of every thunderstorm since childhood.", "What does {name} keep a diary of?"),
    ("{name} taught a parrot to recite the names of rivers.", "What did {name} teach a parrot?"),
    ("{name} fixes old radios in a shed behind the post office.", "What does {name} fix in the shed?"),
    ("The tree {name} planted at school is now taller than the gym.", "How tall is the tree {name} planted at school?"),
)

# LongEmbed's passkey frame, one for every haystack and both parts (Zhu et al. 2024, Sec. 3.1): the
# haystacks of a pool differ only in the person and the key, so only whose key it is decides
PASSKEY_FACT = "The pass key of {name} is {key}. Remember it. {key} is the pass key of {name}."
PASSKEY_QUESTION = "What is the pass key of {name}?"

FIRST_NAMES: tuple[str, ...] = (
    "Amara",
    "Bjorn",
    "Celeste",
    "Dmitri",
    "Esme",
    "Farid",
    "Greta",
    "Hiroshi",
    "Ines",
    "Jasper",
    "Kalani",
    "Leopold",
    "Mireille",
    "Nikolai",
    "Odette",
    "Pascal",
    "Quinn",
    "Rosalind",
    "Soren",
    "Tamsin",
    "Ulrich",
    "Violetta",
    "Wendell",
    "Ximena",
    "Yusuf",
    "Zelda",
    "Anouk",
    "Bartholomew",
    "Cosima",
    "Desmond",
    "Elowen",
    "Florian",
    "Gwendolyn",
    "Horatio",
    "Isolde",
    "Joaquin",
    "Katarina",
    "Lysander",
    "Marisol",
    "Neville",
)
SURNAMES: tuple[str, ...] = (
    "Abernathy",
    "Blackwood",
    "Castellanos",
    "Drummond",
    "Eriksen",
    "Fairweather",
    "Gallagher",
    "Halvorsen",
    "Iwasaki",
    "Jovanovic",
    "Kowalczyk",
    "Lindqvist",
    "Montgomery",
    "Nakamura",
    "Okonkwo",
    "Pemberton",
    "Quintero",
    "Rasmussen",
    "Szabo",
    "Thorncroft",
    "Underhill",
    "Valdivia",
    "Whitlock",
    "Yardley",
    "Zimmerman",
    "Ashdown",
    "Brannigan",
    "Cavendish",
    "Delacroix",
    "Ellsworth",
    "Fitzgerald",
    "Grimaldi",
    "Hargreaves",
    "Ingersoll",
    "Jablonski",
    "Kettering",
    "Lockhart",
    "Marchetti",
    "Northcott",
    "Oyelaran",
)


def part_half(values: tuple, split: str) -> tuple:
    """The validation part's half of ``values`` (the first) or the test part's (the second)."""
    half = len(values) // 2
    return values[:half] if split == "val" else values[half:]
