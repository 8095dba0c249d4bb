"""The kernel bank: lessons recorded from searches, task signatures, and the operations that read, search, forget and export them.
May import prompting (contexts a lesson is shown in) and the tools' foundations."""
