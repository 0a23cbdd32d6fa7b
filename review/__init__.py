"""What reviewers see and do, in four rooms, one per concept.

- `review.reviewing` - one reviewer's loop: the items and their display
  models (conversations, agent runs, graded conversations), the queue, the
  rubric criteria, drafts, the blinding rule and the one path that commits an
  answer. Screens: Review, Trajectories, Graded conversations.
- `review.team` - the people and how they work together: reviewers and roles,
  review rounds, adjudication, activity, codebook versions. Screens: Rounds
  and people, Adjudicate, Progress and audit, Codebook.
- `review.browse` - finding things: full-text search, facets, tags, saved
  views, case-study exports. Screen: Browse.
- `review.datasets` - what comes in and goes out: one importer per format
  (`review.datasets.sources`), exports, the demo data. Screen: Data.

`review.text` (untrusted text shown as text) and `review.workspace` (where the
database is) serve every room.
"""
