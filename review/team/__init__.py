"""The team: reviewers and their roles, review rounds, adjudication, activity,
and the codebook versions a study's admins edit."""
