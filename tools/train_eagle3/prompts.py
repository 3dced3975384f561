"""Chat prompts for training and evaluating SmolLM2's EAGLE-3 head, written here (no outside
text): request templates crossed with topics. Topics are split once, by a fixed seed, into a
training set and a held-out set, so no held-out prompt shares a topic with a training prompt."""
import random

TEMPLATES = [
    "What is {t}?", "Explain {t} in simple terms.", "Give me three facts about {t}.", "Write a short story about {t}.",
    "Write a poem about {t}.", "Why is {t} important?", "How does {t} work?", "Describe {t} to a child.",
    "What are the pros and cons of {t}?", "Summarize the history of {t}.", "Give me some tips related to {t}.",
    "Write a short essay on {t}.", "What should a beginner know about {t}?", "Compare {t} with something similar.",
    "List five questions people often ask about {t}.", "Tell me a fun fact about {t}.",
    "Write a haiku about {t}.", "Explain {t} step by step.", "What is the future of {t}?", "Write a dialogue about {t}.",
]

TOPICS = """
the ocean|volcanoes|the moon|photosynthesis|gravity|the water cycle|rainbows|earthquakes|black holes|the solar system
electricity|magnets|the human heart|sleep|exercise|healthy eating|vitamins|the immune system|dinosaurs|fossils
ancient Egypt|the Roman Empire|the printing press|the steam engine|the internet|computers|smartphones|robots
artificial intelligence|machine learning|programming|the Python language|databases|encryption|cloud computing
bees|ants|dolphins|elephants|wolves|owls|penguins|cats|dogs|horses|butterflies|coral reefs|rainforests|deserts
mountains|rivers|glaciers|climate change|recycling|solar power|wind energy|electric cars|trains|airplanes
bicycles|cooking pasta|baking bread|coffee|tea|chocolate|gardening|tomatoes|apples|rice|cheese|soup
music|the piano|the guitar|jazz|painting|photography|poetry|novels|libraries|museums|theater|dance
football|basketball|tennis|chess|swimming|running|yoga|hiking|camping|fishing|sailing|skiing
friendship|kindness|patience|honesty|teamwork|leadership|time management|saving money|budgeting|learning a language
mathematics|prime numbers|fractions|geometry|statistics|probability|algebra|the number zero|measurement|maps
weather|clouds|snow|thunderstorms|the seasons|the sun|stars|comets|telescopes|astronauts|rockets|satellites
bridges|castles|skyscrapers|lighthouses|windmills|clocks|calendars|money|markets|farming|fishing boats|cities
villages|islands|forests|lakes|caves|waterfalls|the Arctic|the Amazon|the Sahara|the Himalayas|the Nile
writing emails|job interviews|public speaking|studying for exams|note taking|reading habits|journaling|meditation
the color blue|the number seven|paper|glass|steel|plastic|wood|cotton|salt|sugar|bread ovens|candles
""".replace("\n", "|")


QUALIFIERS = """ancient|modern|tiny|giant|everyday|famous|forgotten|future|local|traditional|homemade|wild|urban|rural
underwater|winter|summer|night|morning|childhood|digital|handmade|simple|strange|beautiful|dangerous|quiet|noisy""".replace("\n", "|").split("|")


def with_qualifiers(topic_list, n, seed):
    """n topics more: a qualifier and a topic of the list ("tiny robots", "winter rivers")."""
    rng = random.Random(seed)
    pairs = [f"{q} {t}" for q in QUALIFIERS for t in topic_list]
    rng.shuffle(pairs)
    return pairs[:n]


def topics():
    return [t.strip() for t in TOPICS.split("|") if t.strip()]


def split(seed=0, held_out_fraction=0.15):
    ts = topics()
    rng = random.Random(seed)
    rng.shuffle(ts)
    n = max(1, int(len(ts) * held_out_fraction))
    return ts[n:], ts[:n]


def prompts(topic_list, seed):
    rng = random.Random(seed)
    out = [tpl.format(t=t) for t in topic_list for tpl in TEMPLATES]
    rng.shuffle(out)
    return out
