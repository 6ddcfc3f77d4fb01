/* jo_esc_term: text from outside made safe for a terminal, as `ls -b` shows names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/esc.h"

static const char *esc(const char *s)
{
	static char buf[4096];

	return jo_esc_term(buf, sizeof(buf), s);
}

static void esc_keeps_plain_text_without_copying(void **state)
{
	const char *s = "chunks/0/1/1234_0_4194304 a b.txt";
	const char *u = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xef\xbf\xbd";
	char buf[8];

	(void)state;
	assert_ptr_equal(jo_esc_term(buf, sizeof(buf), s), s);
	assert_ptr_equal(jo_esc_term(buf, sizeof(buf), u), u); /* valid UTF-8: kept */
	assert_ptr_equal(jo_esc_term(buf, sizeof(buf), ""), "");
}

static void esc_writes_c_escapes_as_ls_b(void **state)
{
	(void)state;
	assert_string_equal(esc("a\nb"), "a\\nb");
	assert_string_equal(esc("\a\b\t\n\v\f\r"), "\\a\\b\\t\\n\\v\\f\\r");
	assert_string_equal(esc("back\\slash"), "back\\\\slash");
	assert_string_equal(esc("\x1b[31mred\x1b[0m"), "\\033[31mred\\033[0m");
	assert_string_equal(esc("\x01\x1f"), "\\001\\037");
	assert_string_equal(esc("del\x7f"), "del\\177");
	/* a title-setting OSC sequence ends in BEL */
	assert_string_equal(esc("\x1b]0;owned\x07"), "\\033]0;owned\\a");
}

static void esc_escapes_c1_and_invalid_utf8_bytewise(void **state)
{
	(void)state;
	/* U+009B (CSI) and U+0085 (NEL) are controls, even as valid UTF-8 */
	assert_string_equal(esc("c1\xc2\x9b" "2J"), "c1\\302\\2332J");
	assert_string_equal(esc("\xc2\x85"), "\\302\\205");
	assert_string_equal(esc("\xc2\xa0"), "\xc2\xa0"); /* U+00A0 is printable */
	assert_string_equal(esc("bad\xff\xc3"), "bad\\377\\303");
	assert_string_equal(esc("\xc0\xaf"), "\\300\\257");           /* overlong '/' */
	assert_string_equal(esc("\xe0\x80\xaf"), "\\340\\200\\257");   /* overlong */
	assert_string_equal(esc("\xed\xa0\x80"), "\\355\\240\\200");   /* surrogate */
	assert_string_equal(esc("\xf4\x90\x80\x80"), "\\364\\220\\200\\200"); /* > U+10FFFF */
	assert_string_equal(esc("\xe6\x97"), "\\346\\227");            /* cut short */
	assert_string_equal(esc("\xe6\x97" "x\xe6\x97\xa5"), "\\346\\227x\xe6\x97\xa5");
	/* a continuation byte on its own, then a good character */
	assert_string_equal(esc("\x80\xc3\xa9"), "\\200\xc3\xa9");
}

static void esc_cuts_whole_escapes_and_says_so(void **state)
{
	char buf[12];
	const char *r;

	(void)state;
	/* fits exactly: no dots */
	r = jo_esc_term(buf, 8, "ab\ncd");
	assert_string_equal(r, "ab\\ncd");
	r = jo_esc_term(buf, 7, "ab\ncd");
	assert_string_equal(r, "ab\\ncd");
	/* one byte short: cut before a piece, "..." */
	r = jo_esc_term(buf, 6, "ab\ncd");
	assert_string_equal(r, "ab...");
	/* an escape is never split */
	r = jo_esc_term(buf, 9, "abc\x1b" "defgh");
	assert_string_equal(r, "abc...");
	r = jo_esc_term(buf, sizeof(buf), "\x1b\x1b\x1b\x1b");
	assert_string_equal(r, "\\033\\033...");
	assert_true(strlen(r) < sizeof(buf));
	/* a UTF-8 character is never split either */
	r = jo_esc_term(buf, 8, "\n\xe6\x97\xa5\xe6\x97\xa5");
	assert_string_equal(r, "\\n...");
	/* too small for anything */
	r = jo_esc_term(buf, 3, "\n");
	assert_string_equal(r, "");
}

static void esc_max_holds_the_worst_case(void **state)
{
	char in[256], out[JO_ESC_TERM_MAX(255)];
	const char *r;

	(void)state;
	for (int i = 0; i < 255; i++)
		in[i] = (char)(0x80 + (i % 0x40)); /* lone continuation bytes: 4 each */
	in[255] = '\0';
	r = jo_esc_term(out, sizeof(out), in);
	assert_int_equal(strlen(r), 4 * 255);
	assert_null(strstr(r, "..."));
	for (const char *p = r; *p; p++)
		assert_true(*p >= 0x20 && *p < 0x7f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(esc_keeps_plain_text_without_copying),
		cmocka_unit_test(esc_writes_c_escapes_as_ls_b),
		cmocka_unit_test(esc_escapes_c1_and_invalid_utf8_bytewise),
		cmocka_unit_test(esc_cuts_whole_escapes_and_says_so),
		cmocka_unit_test(esc_max_holds_the_worst_case),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
