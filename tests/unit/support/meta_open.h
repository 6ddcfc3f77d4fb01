/* meta_open.h: open a metadata engine in a unit test, or fail the test. */
#ifndef JO_TEST_META_OPEN_H
#define JO_TEST_META_OPEN_H

struct jo_meta;

/* jo_meta_open(url); a failure fails the test, naming the URL and the error. */
struct jo_meta *meta_open_ok(const char *url);

#endif
