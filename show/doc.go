// Package show renders untrusted text and JSON values so that a person reads
// them as they are: Inert makes every character that could change how the
// text around it reads visible as an escape, and Value, Fields, Key and String
// show a value as the JSON it is, with strings that look alike kept apart.
//
// Everything an agent, a requester or a target wrote reaches a person through
// this package (the Slack message, the CLI, errors); it imports no part of
// signoff, so every renderer can use it.
package show
