# shellcheck shell=bash
# What the talkers of `scripts/bench doubletalk` say (sourced by doubletalk.sh and aecdelay.sh,
# which renders the same voices for its offline runs).
DT_FAR_EN="Good morning everyone, thanks for joining the weekly planning meeting. Today we review the \
release schedule, the open hardware issues, and the results of the field trial in the Berlin office. \
The trial went well overall; the rooms with the new ceiling microphones sounded much clearer."
DT_FAR_DE="Guten Morgen zusammen, danke, dass ihr heute dabei seid. Wir besprechen den Zeitplan für \
die nächste Version, die offenen Fragen zur Hardware und die Ergebnisse aus dem Berliner Büro. \
Insgesamt lief der Versuch gut, und die neuen Mikrofone an der Decke klangen deutlich klarer."
DT_NEAR_EN="Sorry to interrupt, but the second room still had an echo on Tuesday afternoon. \
I think we should check the speaker placement first."
DT_NEAR_DE="Entschuldigung, dass ich unterbreche, aber im zweiten Raum gab es noch ein Echo. \
Wir sollten zuerst die Lautsprecher prüfen."
