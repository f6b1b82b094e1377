"""How help-desk callers word their requests: the goal parser's templates (see :mod:`agentic_ray.domains.rendering`).

Templates are grouped by family; within a family and slot set, every third one is held out by the parser's
build (the first template of each family is the one ``tasks.py`` writes).
"""

from __future__ import annotations

from agentic_ray.domains.protocol import Task
from agentic_ray.domains.rendering import Renderings

TEMPLATES: dict[str, tuple[str, ...]] = {
    "password_reset": (
        "I am locked out of my account. Please reset my password and send the new one {delivery}.",
        "I forgot my password and can't log in. Reset it and deliver the temporary one {delivery}.",
        "My account got locked after too many tries. Please give me a new password {delivery}.",
        "Locked out again! Need a password reset, send it {delivery}.",
        "Could you reset my password? I'm locked out. Send the new password {delivery}.",
        "Password expired and now my login is locked; a reset please, with the new one sent {delivery}.",
        "I can't remember my password and the account is locked. Reset it and send it {delivery}.",
        "Please unlock me with a new password, delivered {delivery}.",
        "Forgot password, locked out. New one {delivery} please.",
    ),
    "disabled_account": (
        "I cannot sign in to anything since this morning. Can you reset my password?",
        "Since today none of my logins work, it says my account is disabled. Can you fix it?",
        "My account seems deactivated, I can't get into any system. Please help.",
        "Every sign-in fails since this morning with an account disabled message.",
        "Nothing accepts my login today, looks like my account was switched off. Can you reset it?",
        "My user account was disabled overnight and I cannot work. Please re-enable it.",
        "My login is rejected everywhere, the account shows as disabled.",
        "I was told my account is deactivated. I need access again today.",
        "Since this morning I cannot log into any system, can you help?",
    ),
    "lost_device": (
        "My {kind} was stolen from my car last night. I opened ticket {ticket} about it.",
        "Someone stole my company {kind} yesterday; I already filed ticket {ticket}.",
        "I lost my work {kind} on the train. Ticket {ticket} has the details.",
        "Ticket {ticket}: my {kind} was stolen, please lock it.",
        "My {kind} went missing at the airport, see ticket {ticket}.",
        "The {kind} I was issued got stolen. I reported it in {ticket}.",
        "My {kind} was taken from my bag, I logged it as ticket {ticket}.",
        "I can't find my {kind}, I think it was stolen. Ticket {ticket}.",
        "About ticket {ticket}: my {kind} has been stolen, please secure it.",
    ),
    "warranty_inquiry": (
        "How many days of warranty are left on my {kind}?",
        "Is my {kind} still under warranty? How long is left?",
        "When does the warranty of my {kind} run out?",
        "Can you check how much warranty remains on my {kind}?",
        "How long until the warranty on my {kind} expires?",
        "What's the remaining warranty period for my {kind}?",
        "Until when is my {kind} covered by warranty?",
        "How many warranty days does my {kind} still have?",
        "Please tell me the warranty left on my {kind}.",
    ),
    "merge_duplicates": (
        "I opened several tickets about the same {category} problem. Merge them into the oldest one and make it {priority}.",
        "There are duplicate tickets from me about one {category} issue. Please combine them into the first and set it to {priority}.",
        "I filed the same {category} problem a few times by mistake. Merge the duplicates into the oldest ticket, priority {priority}.",
        "Please merge my repeated {category} tickets into the earliest one and raise it to {priority}.",
        "Several of my tickets are about one {category} issue; merge them into the oldest and mark it {priority}.",
        "I have duplicate {category} tickets open. Fold them into the oldest one with {priority} priority.",
        "I reported one {category} issue in several tickets. Merge them into the oldest and set priority {priority}.",
        "Please clean up my duplicate {category} tickets: merge into the earliest one, priority {priority}.",
        "My {category} problem is in more than one ticket; merge them all into the oldest and make it {priority}.",
    ),
}

ENTITY_SLOTS = {"ticket": "ticket"}

VALUE_PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "delivery": {
        "sms": ("by SMS", "by text message", "to my phone by SMS", "via SMS"),
        "manager_email": ("to my manager", "to my manager by email", "via my manager", "to my boss by email"),
    },
    "kind": {
        "laptop": ("laptop", "notebook"),
        "phone": ("phone", "mobile phone"),
        "monitor": ("monitor", "screen"),
        "headset": ("headset", "headphones"),
    },
    "category": {
        "access": ("access", "login access"),
        "hardware": ("hardware",),
        "software": ("software", "application"),
        "network": ("network", "wifi"),
    },
    "priority": {"high": ("high",), "critical": ("critical",)},
}

FACT_TEMPLATES: tuple[str, ...] = (
    "My email is {email}.",
    "My badge number is {badge}.",
    "This is {email}.",
    "Badge {badge} here.",
    "You can reach me at {email}.",
    "My employee badge: {badge}.",
    "Work email: {email}.",
    "I'm badge {badge}.",
    "It's {email} writing.",
    "ID badge is {badge}.",
)


def task_slots(task: Task) -> list[dict[str, str]]:
    """The slot values of the task (help-desk tasks are simple: one dict)."""
    g = {x.id: x for x in task.goals}
    if task.family == "password_reset":
        return [{"delivery": g["reset"].args["delivery"]}]
    if task.family == "disabled_account":
        return [{}]
    if task.family == "lost_device":
        return [{"kind": g["report"].hints["kind"], "ticket": g["escalate"].args["ticket_id"]}]
    if task.family == "warranty_inquiry":
        return [{"kind": g["read"].hints["kind"]}]
    if task.family == "merge_duplicates":
        return [{"category": g["merge"].hints["category"], "priority": g["priority"].args["priority"]}]
    raise KeyError(task.family)


RENDERINGS = Renderings(
    templates=TEMPLATES,
    entity_slots=ENTITY_SLOTS,
    value_phrases=VALUE_PHRASES,
    fact_templates=FACT_TEMPLATES,
    slots=task_slots,
)
