"""How e-commerce customers word their requests: the goal parser's templates (see :mod:`agentic_ray.domains.rendering`).

Templates are grouped by family; within a family and slot set, every third one is held out by the parser's
build (the first template of each family is the one ``tasks.py`` writes).
"""

from __future__ import annotations

from agentic_ray.domains.protocol import Task
from agentic_ray.domains.rendering import Renderings

TEMPLATES: dict[str, tuple[str, ...]] = {
    "address_error": (
        "The address on order {order} is wrong, please send it to {source}.",
        "Order {order} has the wrong delivery address. Could you ship it to {source} instead?",
        "Please change the shipping address of {order} to {source}, the one on it is not right.",
        "I typed a wrong address for order {order}. Deliver it to {source} please.",
        "Can you fix where {order} is going? It should go to {source}.",
        "Wrong address on my order {order}! Send it to {source}.",
        "The delivery address for order {order} is out of date, use {source}.",
        "Please redirect {order} to {source}; the address on the order is a mistake.",
        "I moved, so order {order} has an old address. Please deliver to {source}.",
    ),
    "quality_refund": (
        "The {category} item in order {order} arrived broken, I want my money back.",
        "My {category} product from order {order} is damaged. Please refund it.",
        "I need a refund for the {category} item of {order}, it came defective.",
        "The {category} thing I got in order {order} does not work. Money back please.",
        "Order {order}: the {category} item is broken on arrival, refund me.",
        "Got order {order} today and the {category} piece is cracked. I'd like a refund.",
        "The {category} item from {order} stopped working on day one. I want a refund.",
        "Refund please: the {category} article in order {order} is faulty.",
        "Order {order} arrived and the {category} product inside is smashed, give me my money back.",
    ),
    "logistics_exception": (
        "My parcel for order {order} has been stuck for days.",
        "The package of order {order} has not moved in tracking for a week.",
        "Tracking for {order} shows an exception and nothing happens.",
        "Where is my parcel? Order {order} seems lost with the courier.",
        "Order {order} is stuck at the courier, please look into it.",
        "My delivery {order} has been frozen in transit for days, can you chase the courier?",
        "The courier lost track of order {order}, it has not moved since Monday.",
        "Order {order} has been sitting in a depot for days, the tracking is stuck.",
        "Can you find my package? Order {order} shows a delivery problem and no updates.",
    ),
    "wrong_item_exchange": (
        "Order {order} came with the wrong item, I ordered {sku}.",
        "I received the wrong product in {order}. I wanted {sku}, please exchange it.",
        "You sent me something else in order {order}; it should have been {sku}.",
        "Please swap the item in order {order} for {sku}, which is what I bought.",
        "Order {order} has the wrong item inside. Exchange it for {sku} please.",
        "Wrong item in {order}! I paid for {sku}.",
        "The box for order {order} had a different product, not {sku} as I ordered.",
        "I got the wrong thing in {order}. Please send {sku} and take this back.",
        "Order {order} contains an item I never bought; I want {sku} instead.",
    ),
    "late_delivery": (
        "Order {order} is several days late. I want my shipping fee back.",
        "My order {order} is overdue, please refund the shipping cost.",
        "Order {order} still has not arrived and it is late. Compensate the delivery fee.",
        "{order} is way past its delivery date, I'd like the shipping fee refunded.",
        "The delivery of {order} is late by days. Give me back the postage.",
        "Order {order} should have been here last week. Refund my shipping please.",
        "Order {order} is delayed a lot. Please give me the delivery charge back.",
        "My order {order} arrives late, I expect the shipping fee to be refunded.",
        "{order} has been late for days now, compensate me for the shipping.",
    ),
    "cancellation": (
        "Please cancel order {order}, I no longer need it.",
        "Please cancel my order that has not shipped yet, I no longer need it.",
        "I want to cancel {order}.",
        "Cancel my unshipped order please, I changed my mind.",
        "Could you cancel order {order}? I do not want it anymore.",
        "I would like to cancel the order that hasn't shipped.",
        "Stop order {order} please, cancel it before it ships.",
        "Please call off my order that is not shipped yet.",
        "Order {order} is not needed any more, please cancel.",
        "My order that is still waiting to ship: cancel it please.",
        "Cancel order {order} please, I ordered it by mistake.",
        "Please cancel the order I placed that has not been shipped.",
        "I changed my mind about {order}, please cancel it.",
        "Cancel whichever of my orders has not shipped yet.",
        "Can you cancel my order {order}? I don't need it.",
        "I don't need my not-yet-shipped order any more, cancel it.",
    ),
    "stock_inquiry": (
        "How many {sku} do you still have?",
        "Is {sku} in stock? How many are left?",
        "Could you tell me the stock level of {sku}?",
        "How many units of {sku} are available right now?",
        "Do you have {sku} in stock, and how many?",
        "What is the remaining quantity of {sku}?",
        "I want to buy {sku}, how many do you have?",
        "Any {sku} left in the warehouse? How many?",
        "How much stock is there of {sku}?",
    ),
    "multi_item_return": (
        "Both {category} items in order {order} are faulty, I am sending them back.",
        "I want to return the two {category} products from order {order}, they are defective.",
        "The {category} items of {order} are both broken. I'll return them.",
        "Please set up a return for both {category} things in order {order}.",
        "Order {order}: the two {category} items don't work, I'm returning them.",
        "I am sending back the pair of {category} items from {order}, both faulty.",
        "Two {category} items in order {order} are defective and I want to return both.",
        "I need to return both of the {category} products from {order}, neither works.",
        "The pair of {category} items I got in order {order} are faulty, please arrange a return.",
    ),
    "chargeback_dispute": (
        "I am filing a chargeback with my bank for order {order}.",
        "I'm disputing the payment for {order} with my credit card company.",
        "My bank will reverse the charge of order {order}, I opened a dispute.",
        "I have asked my card issuer to charge back order {order}.",
        "Order {order}: I am going to dispute this charge with my bank.",
        "I started a payment dispute on {order} with the bank.",
        "I will contest the charge for order {order} with my bank.",
        "My card company is handling a chargeback for {order}.",
        "I reported order {order} to my bank as a disputed payment.",
    ),
}

ENTITY_SLOTS = {"order": "order", "sku": "product"}

VALUE_PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "source": {
        "pickup_point": ("a parcel locker", "the parcel locker", "a pickup point", "the pick-up locker"),
        "profile": (
            "my profile address",
            "the address in my profile",
            "my account address",
            "my saved address",
        ),
    },
    "category": {
        "electronics": ("electronics", "electronic"),
        "apparel": ("apparel", "clothing"),
        "home": ("home", "homeware"),
        "beauty": ("beauty", "cosmetics"),
    },
}

FACT_TEMPLATES: tuple[str, ...] = (
    "My email is {email}.",
    "I'm {name}, zip {zip}.",
    "You can find my account under {email}.",
    "This is {name}, zip code {zip}.",
    "Account email: {email}.",
    "Name {name}, postcode {zip}.",
    "Reach me at {email}.",
    "{name} here, my zip code is {zip}.",
    "I registered with {email}.",
    "My name is {name} and my zip is {zip}.",
)


def _slots_of(task: Task, family: str, pre: str) -> dict[str, str]:
    g = {x.id.removeprefix(pre): x for x in task.goals if x.id.startswith(pre)}
    mentioned = {m.id for m in task.request.mentioned}
    if family == "address_error":
        return {"order": g["address"].args["order_id"], "source": g["address"].args["source"]}
    if family == "quality_refund":
        return {"order": g["refund"].args["order_id"], "category": g["refund"].hints["category"]}
    if family == "logistics_exception":
        return {"order": g["express"].args["order_id"]}
    if family == "wrong_item_exchange":
        return {"order": g["exchange"].args["order_id"], "sku": g["exchange"].args["sku"]}
    if family == "late_delivery":
        return {"order": task.extra[f"{pre}compensated_order"]}
    if family == "cancellation":
        oid = g["cancel"].args["order_id"]
        return {"order": oid} if oid in mentioned else {}
    if family == "stock_inquiry":
        return {"sku": g["check"].args["sku"]}
    if family == "multi_item_return":
        return {"order": g["return"].args["order_id"], "category": g["return"].hints["category"]}
    if family == "chargeback_dispute":
        return {"order": task.request.mentioned[0].id}
    raise KeyError(family)


def task_slots(task: Task) -> list[dict[str, str]]:
    """The slot values of each subtask, in the order the request raises them."""
    if task.subtasks:
        return [_slots_of(task, fam, f"{'ab'[k]}.") for k, fam in enumerate(task.subtasks)]
    return [_slots_of(task, task.family, "")]


RENDERINGS = Renderings(
    templates=TEMPLATES,
    entity_slots=ENTITY_SLOTS,
    value_phrases=VALUE_PHRASES,
    fact_templates=FACT_TEMPLATES,
    slots=task_slots,
    composite_families=frozenset({"composite"}),
)
